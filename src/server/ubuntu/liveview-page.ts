/**
 * The live-view page of an ubuntu instance (`stream_url`): liveview.html with its script
 * liveview.page.mjs (inlined, ../pages/pages.ts), noVNC (npm `@novnc/novnc`, its `core/` and
 * `vendor/` ES modules served from node_modules) connected to `/stream/<id>/websockify?token=…`,
 * view and control.
 *
 * The server checks `?token=` on every `/stream/` request, and relative module imports drop
 * the query. So the page carries an import map with one entry per noVNC module, mapping
 * `./novnc/<file>` to `./novnc/<file>?token=<token>`; every import, however deep, then asks
 * for a URL that carries the token.
 */
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { serverError } from '../errors.js';
import { fillPage, loadPage, scriptJson } from '../pages/pages.js';
import type { StreamPage } from '../instances/runtime.js';

export interface VncPageOptions {
  /** The VNC password the page hands to x11vnc (the page itself is behind the token). */
  password: string;
}

const PAGE = new URL('./liveview.html', import.meta.url);

/** Directory of the installed `@novnc/novnc` package. */
const NOVNC_ROOT = dirname(dirname(createRequire(import.meta.url).resolve('@novnc/novnc')));
/** The module trees the page may load. */
const SERVED_DIRS = ['core', 'vendor'];
const MODULE_PATH = /^(?:core|vendor)\/[A-Za-z0-9_\-./]+\.js$/;

let moduleList: Promise<string[]> | undefined;
const moduleCache = new Map<string, Promise<Buffer>>();

/** Every `.js` file under core/ and vendor/, as package-relative POSIX paths. */
function modules(): Promise<string[]> {
  moduleList ??= (async () => {
    const out: string[] = [];
    for (const top of SERVED_DIRS) {
      const entries = await readdir(join(NOVNC_ROOT, top), {
        recursive: true,
        withFileTypes: true,
      });
      for (const e of entries) {
        if (!e.isFile() || !e.name.endsWith('.js')) continue;
        out.push(relative(NOVNC_ROOT, join(e.parentPath, e.name)).split(sep).join('/'));
      }
    }
    return out.sort();
  })();
  moduleList.catch(() => (moduleList = undefined));
  return moduleList;
}

/** Answer a GET under `/stream/<id>/<rest>` for an ubuntu instance's live view (else 404). */
export async function vncLiveViewPage(
  rest: string,
  query: URLSearchParams,
  opts: VncPageOptions,
): Promise<StreamPage> {
  if (rest === '' || rest === 'index.html') {
    return {
      status: 200,
      type: 'text/html; charset=utf-8',
      body: await page(await modules(), query.get('token') ?? '', opts),
    };
  }
  if (rest.startsWith('novnc/')) {
    const file = rest.slice('novnc/'.length);
    if (
      MODULE_PATH.test(file) &&
      !file.split('/').includes('..') &&
      (await modules()).includes(file)
    ) {
      let body = moduleCache.get(file);
      if (!body) {
        body = readFile(join(NOVNC_ROOT, file));
        moduleCache.set(file, body);
        body.catch(() => moduleCache.delete(file));
      }
      return { status: 200, type: 'text/javascript; charset=utf-8', body: await body };
    }
  }
  throw serverError('live_view_not_found');
}

/** The page for `token`: one import-map entry per noVNC module, adding the token to its URL. */
async function page(files: string[], token: string, opts: VncPageOptions): Promise<string> {
  const suffix = `?token=${encodeURIComponent(token)}`;
  const imports: Record<string, string> = {};
  for (const f of files) imports[`./novnc/${f}`] = `./novnc/${f}${suffix}`;
  return fillPage(await loadPage(PAGE), {
    importmap: scriptJson({ imports }),
    options: scriptJson({ password: opts.password }),
  });
}
