// Removes what an earlier build left in dist/ whose source is gone (a module moved or deleted):
// tsc and copy-assets only ever add, and the package ships dist/ as it is. A built file is kept
// when its source exists: `x.js`, `x.d.ts`, `x.js.map` ← `x.ts`; a copied asset ← the same
// path under the repository. Run by `npm run build` after both, so it never removes fresh output.
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');

/** The source a file of dist/ was made from, relative to the repository. */
function sourceOf(built: string): string[] {
  const m = /^(.*?)(\.d\.ts|\.js\.map|\.js)$/.exec(built);
  return m ? [`${m[1]}.ts`, `${m[1]}.mts`] : [built];
}

let removed = 0;
function walk(dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      walk(path);
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
      continue;
    }
    const rel = relative(dist, path);
    if (!sourceOf(rel).some((s) => existsSync(join(root, s)))) {
      rmSync(path, { force: true });
      removed++;
    }
  }
}
if (existsSync(dist)) walk(dist);
if (process.argv.includes('--verbose')) console.log(`prune-dist: ${removed} stale files removed`);
