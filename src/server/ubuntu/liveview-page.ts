/**
 * The live-view page of an ubuntu instance (`stream_url`): noVNC (npm `@novnc/novnc`, its
 * `core/` and `vendor/` ES modules served from node_modules) connected to
 * `/stream/<id>/websockify?token=…`, view and control.
 *
 * The server checks `?token=` on every `/stream/` request, and relative module imports drop
 * the query. So the page carries an import map with one entry per noVNC module, mapping
 * `./novnc/<file>` to `./novnc/<file>?token=<token>`; every import, however deep, then asks
 * for a URL that carries the token.
 */
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import type { StreamPage } from '../browser/liveview-page.js';

export interface VncPageOptions {
  /** The VNC password the page hands to x11vnc (the page itself is behind the token). */
  password: string;
}

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

/** Answer a GET under `/stream/<id>/<rest>` for an ubuntu instance's live view. */
export async function vncLiveViewPage(
  rest: string,
  query: URLSearchParams,
  opts: VncPageOptions,
): Promise<StreamPage> {
  if (rest === '' || rest === 'index.html') {
    return {
      status: 200,
      type: 'text/html; charset=utf-8',
      body: page(await modules(), query.get('token') ?? '', opts),
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
  return { status: 404, type: 'application/json', body: JSON.stringify({ detail: 'Not Found' }) };
}

/** JSON safe to place inside a `<script>` element. */
const scriptJson = (v: unknown) =>
  JSON.stringify(v).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');

function page(files: string[], token: string, opts: VncPageOptions): string {
  const suffix = `?token=${encodeURIComponent(token)}`;
  const imports: Record<string, string> = {};
  for (const f of files) imports[`./novnc/${f}`] = `./novnc/${f}${suffix}`;
  const script = String.raw`
import RFB from './novnc/core/rfb.js';
const { password } = ${scriptJson({ password: opts.password })};
const screen = document.getElementById('screen');
const status = document.getElementById('status');
const url = new URL('websockify' + location.search, location.href);
url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
let retry = 500;

function say(text) {
  status.textContent = text;
  status.hidden = !text;
}

function connect() {
  const rfb = new RFB(screen, url.href, { credentials: { password }, wsProtocols: ['binary'] });
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.focusOnClick = true;
  rfb.background = '#1e1e1e';
  rfb.addEventListener('connect', () => {
    retry = 500;
    say('');
    document.body.dataset.connected = 'true';
    rfb.focus();
  });
  rfb.addEventListener('credentialsrequired', () => rfb.sendCredentials({ password }));
  rfb.addEventListener('securityfailure', (e) => say('Access refused: ' + (e.detail.reason || 'security failure')));
  rfb.addEventListener('disconnect', () => {
    document.body.dataset.connected = 'false';
    say('Disconnected; reconnecting…');
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 8000);
  });
  window.rfb = rfb;
}
connect();
`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>burrow live view</title>
<style>
  html, body { margin: 0; height: 100%; background: #1e1e1e; overflow: hidden; }
  #screen { width: 100vw; height: 100vh; }
  #status { position: fixed; top: 8px; left: 8px; padding: 4px 8px; border-radius: 4px;
    font: 13px system-ui, sans-serif; color: #eee; background: rgba(0, 0, 0, .6); }
</style>
<script type="importmap">${scriptJson({ imports })}</script>
</head>
<body>
<div id="screen"></div>
<div id="status">Connecting…</div>
<script type="module">${script}</script>
</body>
</html>
`;
}
