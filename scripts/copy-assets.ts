// Copies the non-TypeScript files that ship with the package (Python run inside sandboxes,
// live-view pages) from src/ to dist/src/, beside the compiled modules that load them with
// `new URL('./file', import.meta.url)`. Run by `npm run build` after tsc.
import { cpSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const ASSET = /\.(py|html|css|mjs)$/;
const root = new URL('..', import.meta.url).pathname;

function walk(dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (ASSET.test(name)) cpSync(path, join(root, 'dist', relative(root, path)));
  }
}
walk(join(root, 'src'));
