/**
 * What the auth-state store (auth-states/store.ts) reports to the quotas:
 * `usage` counts exactly the states of the set it is given (a project's caps are charged only
 * for that project's states).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthStore } from '../../src/server/auth-states/store.js';
import type { BrowserAuthData } from '../../src/server/instances/runtime.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-authusage-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const quiet = { warn: () => {} };
const data = (value: string): BrowserAuthData => ({
  cookies: [{ name: 'sid', value, domain: 'example.test', path: '/' }],
  localStorage: {},
  sessionStorage: {},
  indexedDB: {},
});

describe('usage', () => {
  it('counts the states of the given set only, and all of them without one', async () => {
    const store = new AuthStore(tempDir(), { env: {}, ...quiet });
    const a = await store.save('a', data('x'));
    const b = await store.save('b', data('y'.repeat(5000)));
    const c = await store.save('c', data('z'));
    const all = store.usage();
    const ab = store.usage(new Set([a.id, b.id]));
    const cOnly = store.usage(new Set([c.id]));
    expect(all.count).toBe(3);
    expect(ab.count).toBe(2);
    expect(cOnly.count).toBe(1);
    expect(ab.bytes).toBeGreaterThan(5000);
    expect(cOnly.bytes).toBeGreaterThan(0);
    expect(ab.bytes + cOnly.bytes).toBe(all.bytes);
    expect(store.usage(new Set(['another-project-state']))).toEqual({ count: 0, bytes: 0 });
  });
});
