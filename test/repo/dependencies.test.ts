/**
 * The import rules of docs/architecture.md, checked on the module graph of src/ and adapters/ as
 * the TypeScript parser reads it (./deps.ts, the rules as data in ./floors.ts): api/ imports only zod; client/ and
 * session/ never import server/ (session/ may load the server's entry point lazily with
 * `import()`); server/ never imports client/ or session/; inside server/, each room imports only
 * the rooms on the floors below its own (SERVER_FLOORS: the entry point and the modules at the
 * top of the folder are rooms too); adapters import only the package's entry points or the
 * session's leaf driver module; internal/ is a leaf; and no cycles, type-only ones included. A
 * failure lists each offending import as `file:line imports 'spec' → target: rule`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  buildGraph,
  checkRules,
  cycles,
  describe as show,
  floorPlanProblems,
  importsOf,
  optionsFor,
  repoRoot,
  roomsWithoutFloor,
  type Graph,
} from './deps.js';
import { KNOWN_CYCLES, KNOWN_VIOLATIONS } from './floors.js';

const root = repoRoot(dirname(fileURLToPath(import.meta.url)));

describe('the real tree', () => {
  const graph = buildGraph(root, ['src', 'adapters']);
  const opts = optionsFor(root);

  it('reads the whole graph, every kind of import', () => {
    expect(graph.files.length).toBeGreaterThan(100);
    const edge = (from: string, to: string) =>
      graph.edges.find((e) => e.from === from && e.to === to);
    expect(edge('src/server/http/app.ts', 'src/api/index.ts')).toMatchObject({ typeOnly: false });
    expect(edge('src/server/http/handlers.ts', 'src/server/instances/registry.ts')).toMatchObject({
      typeOnly: true,
    });
    expect(edge('src/server/index.ts', 'src/server/browser/index.ts')).toMatchObject({
      dynamic: true,
    });
    expect(edge('src/client/core.ts', 'pkg:undici')).toBeDefined();
    expect(edge('src/server/http/app.ts', 'node:crypto')).toBeDefined();
    // the package's own name resolves to the source of its entry point
    expect(graph.edges.some((e) => e.spec === opts.packageName && e.to === 'src/index.ts')).toBe(
      true,
    );
  });

  it('keeps the import rules of docs/architecture.md', () => {
    const found = checkRules(graph, opts).filter(
      (v) => !KNOWN_VIOLATIONS.some((k) => k.from === v.edge.from && k.to === v.edge.to),
    );
    expect(found.map(show)).toEqual([]);
  });

  it('has no import cycles, type-only ones included', () => {
    const found = cycles(graph)
      .map((c) => c.join(' -> '))
      .filter((c) => !KNOWN_CYCLES.some((k) => k.cycle === c));
    expect(found).toEqual([]);
  });

  it('has a floor for every room of src/server/, and nothing for `npm run lint` to print', () => {
    expect(roomsWithoutFloor(root)).toEqual([]);
    expect(floorPlanProblems(root)).toEqual([]);
  });

  it('still needs every known exception (remove the ones that are gone)', () => {
    const violations = checkRules(graph, opts);
    const gone = KNOWN_VIOLATIONS.filter(
      (k) => !violations.some((v) => v.edge.from === k.from && v.edge.to === k.to),
    ).map((k) => `${k.from} → ${k.to}`);
    const shown = cycles(graph).map((c) => c.join(' -> '));
    const goneCycles = KNOWN_CYCLES.filter((k) => !shown.includes(k.cycle)).map((k) => k.cycle);
    expect([...gone, ...goneCycles]).toEqual([]);
  });
});

describe('the checker itself', () => {
  it('reads every form of import, and which are erased', () => {
    const text = [
      "import a from 'a';",
      "import type { B } from 'b';",
      "import { type C, type D } from 'c';",
      "import { type E, e } from 'e';",
      "import 'side-effect';",
      "export { f } from 'f';",
      "export type { G } from 'g';",
      "export * from 'h';",
      "import i = require('i');",
      "const j = await import('j');",
      "type K = import('k').K;",
      "let l: typeof import('l');",
    ].join('\n');
    const seen = importsOf('x.ts', text).map((i) => [i.spec, i.typeOnly, i.dynamic, i.line]);
    expect(seen).toEqual([
      ['a', false, false, 1],
      ['b', true, false, 2],
      ['c', true, false, 3],
      ['e', false, false, 4],
      ['side-effect', false, false, 5],
      ['f', false, false, 6],
      ['g', true, false, 7],
      ['h', false, false, 8],
      ['i', false, false, 9],
      ['j', false, true, 10],
      ['k', true, false, 11],
      ['l', true, false, 12],
    ]);
  });

  // a made-up package on disk that breaks every rule once
  const fixture = mkdtempSync(join(tmpdir(), 'burrow-deps-'));
  afterAll(() => rmSync(fixture, { recursive: true, force: true }));
  const files: Record<string, string> = {
    'package.json': JSON.stringify({
      name: 'pkg',
      exports: {
        '.': { types: './dist/src/index.d.ts', default: './dist/src/index.js' },
        './server': { default: './dist/src/server/index.js' },
        './package.json': './package.json',
      },
    }),
    'src/index.ts': "export * from './session/index.js';",
    'src/api/index.ts': "import { z } from 'zod';\nimport { x } from '../server/errors.js';",
    'src/client/index.ts': "import type { T } from '../server/index.js';",
    'src/session/index.ts':
      "export const s = () => import('pkg/server');\nimport { e } from '../server/errors.js';",
    'src/session/driver.ts': 'export interface Driver {}',
    'src/internal/log.ts': "import type { A } from '../api/index.js';",
    'src/server/index.ts': "import { c } from '../client/index.js';",
    'src/server/errors.ts': "export const e = 1;\nimport type { A } from './sandbox/a.js';",
    'src/server/stray/s.ts': "import { e } from '../errors.js';",
    'src/server/sandbox/a.ts': "import { b } from '../browser/b.js';",
    'src/server/browser/b.ts': "import { u } from '../ubuntu/u.js';\nimport '../chromium/c.js';",
    'src/server/ubuntu/u.ts': "import type { B } from '../browser/b.js';",
    'src/server/chromium/c.ts': "import { a } from '../sandbox/a.js';\nimport '../gone.js';",
    'adapters/one/index.ts':
      "import { s } from 'pkg';\nimport type { D } from '../../src/session/driver.js';\nimport { x } from '../../src/session/index.js';",
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(fixture, path)), { recursive: true });
    writeFileSync(join(fixture, path), text);
  }
  const graph: Graph = buildGraph(fixture, ['src', 'adapters']);
  const found = checkRules(graph, optionsFor(fixture)).map(show);

  it('refuses each broken rule, naming file, line, import and rule', () => {
    expect(found).toEqual([
      "adapters/one/index.ts:3 imports '../../src/session/index.js' → src/session/index.ts: adapters import only the package's entry points (pkg, pkg/…) or src/session/driver.ts",
      "src/api/index.ts:2 imports '../server/errors.js' → src/server/errors.ts: api/ imports only zod (and itself)",
      "src/client/index.ts:1 imports '../server/index.js' (type-only) → src/server/index.ts: client/ never imports server/ (session/ may only load its entry point with import())",
      "src/internal/log.ts:1 imports '../api/index.js' (type-only) → src/api/index.ts: internal/ is a leaf: it imports no other part of src/",
      "src/server/browser/b.ts:1 imports '../ubuntu/u.js' → src/server/ubuntu/u.ts: server/browser imports only the floors below it; server/ubuntu is beside it",
      "src/server/chromium/c.ts:2 imports '../gone.js' → missing:../gone.js: an import names a module that does not exist",
      "src/server/errors.ts:2 imports './sandbox/a.js' (type-only) → src/server/sandbox/a.ts: server/base imports only the floors below it; server/sandbox is above it",
      "src/server/index.ts:1 imports '../client/index.js' → src/client/index.ts: server/ never imports client/",
      "src/server/sandbox/a.ts:1 imports '../browser/b.js' → src/server/browser/b.ts: server/sandbox imports only the floors below it; server/browser is above it",
      "src/server/stray/s.ts:1 imports '../errors.js' → src/server/errors.ts: server/stray/ is no room of the floor plan (add its row)",
      "src/server/ubuntu/u.ts:1 imports '../browser/b.js' (type-only) → src/server/browser/b.ts: server/ubuntu imports only the floors below it; server/browser is beside it",
      "src/session/index.ts:2 imports '../server/errors.js' → src/server/errors.ts: session/ never imports server/ (session/ may only load its entry point with import())",
    ]);
    // allowed: the lazy import of the server's entry, the driver leaf, the public entry, zod
    expect(found.join('\n')).not.toMatch(/import\('pkg\/server'\)|'pkg'|driver\.js'|'zod'/);
  });

  it('finds cycles, type-only edges included', () => {
    // u.ts → b.ts and client → server are type-only: still cycles
    expect(
      cycles(graph)
        .map((c) => c.join(' -> '))
        .sort(),
    ).toEqual([
      'src/client/index.ts -> src/server/index.ts -> src/client/index.ts',
      'src/server/browser/b.ts -> src/server/ubuntu/u.ts -> src/server/browser/b.ts',
    ]);
  });

  it('names each folder of src/server/ without a floor, subfolders belonging to their room', () => {
    // src/server/stray/ has no row; src/server/sandbox/space/ is part of server/sandbox
    mkdirSync(join(fixture, 'src/server/sandbox/space'), { recursive: true });
    writeFileSync(join(fixture, 'src/server/sandbox/space/none.ts'), "import '../a.js';");
    expect(roomsWithoutFloor(fixture)).toEqual(['server/stray']);
    const again = checkRules(buildGraph(fixture, ['src']), optionsFor(fixture)).map(show);
    expect(again.filter((v) => v.includes('space/'))).toEqual([]);
    expect(floorPlanProblems(fixture)).toContain(
      'src/server/stray/ has no floor: add its row to SERVER_FLOORS (test/repo/floors.ts)',
    );
  });
});
