/**
 * DESIGN.md's module boundaries, checked rather than agreed (STYLE.md 10):
 * api imports only zod; client and session never import server (the embedded default's lazy
 * dynamic import is the one exception); server never imports client or session; adapters import
 * only the package's public entry points (and their own peer dependency).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function files(dir: string): string[] {
  const abs = join(root, dir);
  return readdirSync(abs).flatMap((name) => {
    const p = join(abs, name);
    if (statSync(p).isDirectory()) return files(relative(root, p));
    return /\.tsx?$/.test(name) ? [relative(root, p)] : [];
  });
}

interface Import {
  file: string;
  spec: string;
  dynamic: boolean;
  /** Repository-relative target for relative specifiers. */
  target?: string;
}

function imports(file: string): Import[] {
  const text = readFileSync(join(root, file), 'utf8');
  const out: Import[] = [];
  const re =
    /(?:^|\n)\s*(?:import|export)\s(?:[^'";]*?\sfrom\s)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (const m of text.matchAll(re)) {
    const spec = (m[1] ?? m[2])!;
    const imp: Import = { file, spec, dynamic: m[2] !== undefined };
    if (spec.startsWith('.')) imp.target = relative(root, resolve(root, dirname(file), spec));
    out.push(imp);
  }
  return out;
}

const all = (dir: string) => files(dir).flatMap(imports);
const into = (imp: Import, dir: string) => imp.target?.startsWith(`${dir}/`) ?? false;

describe('import rules (DESIGN.md)', () => {
  it('finds the modules it checks', () => {
    expect(files('src/api').length).toBeGreaterThan(2);
    expect(all('src/server').length).toBeGreaterThan(10);
  });

  it('src/api imports only zod', () => {
    const bad = all('src/api').filter((i) => (i.target ? !into(i, 'src/api') : i.spec !== 'zod'));
    expect(bad).toEqual([]);
  });

  it('src/client never imports server or session', () => {
    const bad = all('src/client').filter(
      (i) => into(i, 'src/server') || into(i, 'src/session') || i.spec.startsWith('burrow-sandbox/server'),
    );
    expect(bad).toEqual([]);
  });

  it('src/session imports server only lazily, with a dynamic import', () => {
    const bad = all('src/session').filter(
      (i) => (into(i, 'src/server') || i.spec === 'burrow-sandbox/server') && !i.dynamic,
    );
    expect(bad).toEqual([]);
  });

  it('src/server never imports client or session', () => {
    const bad = all('src/server').filter((i) => into(i, 'src/client') || into(i, 'src/session'));
    expect(bad).toEqual([]);
  });

  it('adapters import only the public entry points and their peers', () => {
    const allowed =
      /^(burrow-sandbox(\/[a-z-]+)?|playwright-core|puppeteer-core|@playwright\/test|node:.*)$/;
    const bad = all('adapters').filter((i) =>
      i.target ? !i.target.startsWith('adapters/') : !allowed.test(i.spec),
    );
    expect(bad).toEqual([]);
  });
});
