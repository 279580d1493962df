/**
 * The pages the server serves (the live views) are real files beside the modules that serve
 * them, copied to dist/ by scripts/copy-assets.ts: an HTML document whose
 * `<script type="module" src="./<name>.mjs"></script>` elements name plain JavaScript modules
 * beside it (linted by eslint as browser code). The server inlines those modules, so a page
 * stays one self-contained response: every `/stream/` URL needs the token, and a page's own
 * query is the one place it has it. A page may hold `{{name}}` placeholders that `fillPage`
 * replaces per request.
 */
import { readFile } from 'node:fs/promises';

const MODULE_SCRIPT = /<script type="module" src="\.\/([\w-]+(?:\.[\w-]+)*\.mjs)"><\/script>/g;
/** What an inlined module must not contain: it would end the element early, or be filled. */
const NOT_INLINABLE = /<\/script|<!--|\{\{/i;

const pages = new Map<string, Promise<string>>();

/** The page at `url` with its module scripts inlined; read from disk once. */
export function loadPage(url: URL): Promise<string> {
  let page = pages.get(url.href);
  if (!page) {
    page = inlineModules(url);
    pages.set(url.href, page);
    page.catch(() => pages.delete(url.href));
  }
  return page;
}

async function inlineModules(url: URL): Promise<string> {
  const html = await readFile(url, 'utf8');
  const names = [...new Set([...html.matchAll(MODULE_SCRIPT)].map((m) => m[1]!))];
  const modules = new Map<string, string>();
  for (const name of names) {
    const code = await readFile(new URL(`./${name}`, url), 'utf8');
    if (NOT_INLINABLE.test(code)) {
      throw new Error(`${name} cannot be inlined into a page: it contains </script, <!-- or {{`);
    }
    modules.set(name, code);
  }
  return html.replace(
    MODULE_SCRIPT,
    (_, name: string) => `<script type="module">\n${modules.get(name)!}</script>`,
  );
}

/** `page` with every `{{name}}` replaced by `values[name]`, which must be safe where it stands. */
export function fillPage(page: string, values: Readonly<Record<string, string>>): string {
  return page.replace(/\{\{(\w+)\}\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`The page has no value for {{${name}}}`);
    return value;
  });
}

/** JSON safe inside a `<script>` element (no `<`, `>` or `&` that HTML could read). */
export const scriptJson = (v: unknown): string =>
  JSON.stringify(v).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
