/** docs/errors.md must list every error class the public entry exports and every code. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { operationIds, operations } from '../../src/api/index.js';
import * as client from '../../src/index.js';
import { ERROR_CODES, SESSION_ERROR_CODES } from '../../src/client/errors.js';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
/** The table's rows as [class, code]. */
const rows = [...doc.matchAll(/^\| `(\w+)` \| `?([\w ()]+?)`? \|/gm)].map((m) => [m[1], m[2]]);

const errorClasses = Object.entries(client)
  .filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error)
  .map(([name]) => name);

describe('docs/errors.md', () => {
  it('finds the exported error classes (sanity check of this test)', () => {
    expect(errorClasses).toContain('BurrowError');
    expect(errorClasses).toContain('ValidationError');
    expect(errorClasses).toContain('SessionStartError');
    expect(errorClasses.length).toBeGreaterThanOrEqual(22);
  });

  it.each(errorClasses)('has a row for %s', (name) => {
    expect(rows.map(([cls]) => cls)).toContain(name);
  });

  it.each([...ERROR_CODES, ...SESSION_ERROR_CODES])('documents the code %s', (code) => {
    expect(rows.map(([, c]) => c)).toContain(code);
  });

  it('documents no class that is not exported', () => {
    for (const [cls] of rows) expect(errorClasses).toContain(cls);
  });

  it('lists exactly the operations that are never retried after reaching the server', () => {
    const list = /<!-- non-idempotent -->([^]*?)<!-- \/non-idempotent -->/.exec(doc)?.[1] ?? '';
    const documented = [...list.matchAll(/`([\w.]+)`/g)].map((m) => m[1]);
    const expected = operationIds
      .filter((id) => !operations[id].idempotent)
      .map((id) => operations[id].client.join('.'));
    expect(documented.sort()).toEqual(expected.sort());
  });
});
