// Lets the package's type declarations load without its optional peer dependencies
// (playwright-core, puppeteer-core, @playwright/test: package.json `peerDependenciesMeta`).
// The root entry's types reach the adapters' (a session's `page` is Playwright's or Puppeteer's),
// so a project that installed neither peer would fail to compile with "Cannot find module
// 'playwright-core'" unless it sets `skipLibCheck`. Each line of dist/**/*.d.ts that names an
// optional peer gets a `// @ts-ignore` above it: with the peer installed its types are the real
// ones; without it they are `any`, and only code that uses that driver loses its types. Run by
// `npm run build` after tsc; test/repo/package.test.ts compiles against the packed tarball both ways.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
};
const optional = Object.entries(pkg.peerDependenciesMeta ?? {})
  .filter(([, meta]) => meta.optional)
  .map(([name]) => name);

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** A module specifier naming an optional peer or one of its subpaths, in either quote. */
const NAMES_PEER = new RegExp(`(['"])(${optional.map(escape).join('|')})(/[^'"]*)?\\1`);
const IGNORE =
  '// @ts-ignore optional peer dependency: its types are `any` when it is not installed';

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return walk(path);
    return path.endsWith('.d.ts') ? [path] : [];
  });
}

let changed = 0;
for (const file of walk(join(root, 'dist'))) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const out: string[] = [];
  for (const line of lines) {
    const prev = out[out.length - 1]?.trim() ?? '';
    if (NAMES_PEER.test(line) && !prev.startsWith('// @ts-ignore') && !/^\s*(\*|\/\/)/.test(line)) {
      out.push(line.match(/^\s*/)![0] + IGNORE);
      changed++;
    }
    out.push(line);
  }
  const text = out.join('\n');
  if (text !== lines.join('\n')) writeFileSync(file, text);
}
if (process.argv.includes('--verbose')) console.log(`optional-peer-types: ${changed} lines`);
