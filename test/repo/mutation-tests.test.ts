/**
 * `npm run mutation:security` mutates the security modules that stryker.config.mjs names and
 * runs, against each mutant, only the unit tests that stryker.vitest.config.mjs lists. A unit test
 * of a security module left off that list does not count: every mutant it would kill survives
 * (as it did for the egress address model, its Host rule and the relay's large commands until
 * this check). So: every unit test that imports a mutated module is on the list, and every entry
 * of the list exists.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildGraph, repoRoot } from './deps.js';

const root = repoRoot(fileURLToPath(import.meta.url));

describe('the mutation run', () => {
  it('runs every unit test of a mutated module', async () => {
    const config = (await import(join(root, 'stryker.config.mjs'))) as {
      default: { mutate: string[] };
    };
    const { SECURITY_UNIT_TESTS } = (await import(join(root, 'stryker.vitest.config.mjs'))) as {
      SECURITY_UNIT_TESTS: string[];
    };
    const mutated = new Set(config.default.mutate.map((m) => m.replace(/:\d+-\d+$/, '')));
    expect(mutated.size).toBeGreaterThan(10);
    const graph = buildGraph(root, ['test/unit']);
    const testsOf = new Map<string, string[]>();
    for (const e of graph.edges) {
      if (!mutated.has(e.to) || !e.from.endsWith('.test.ts')) continue;
      testsOf.set(e.from, [...(testsOf.get(e.from) ?? []), e.to]);
    }
    expect(testsOf.size).toBeGreaterThan(10);
    const listed = new Set(SECURITY_UNIT_TESTS);
    const missing = [...testsOf].filter(([test]) => !listed.has(test));
    expect(missing.map(([test, mods]) => `${test} (tests ${mods.join(', ')})`)).toEqual([]);
    expect(SECURITY_UNIT_TESTS.filter((t) => !existsSync(join(root, t)))).toEqual([]);
  });
});
