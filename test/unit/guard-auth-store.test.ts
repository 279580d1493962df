/**
 * The sealing of auth states (AES-256-GCM), attacked by someone who can write the data dir but
 * does not hold the key: every seal must use a fresh nonce (a reused GCM nonce gives away the
 * key stream and the authentication key), and a state opens only with its own nonce and its whole
 * tag. A nonce or tag that is changed, borrowed from another file, cut short, empty or missing
 * makes the state unreadable, never a different state.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthStore, seal, type StoredAuthState } from '../../src/server/auth-states/store.js';
import type { BrowserAuthData } from '../../src/server/instances/runtime.js';
import { parseKey } from '../../src/server/auth-states/secret-key.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const data = (value: string): BrowserAuthData => ({
  cookies: [{ name: 'sid', value, domain: 'example.test', path: '/' }],
  localStorage: {},
  sessionStorage: {},
  indexedDB: {},
});

interface Sealed {
  iv?: string | undefined;
  tag?: string | undefined;
  data: string;
}

/** A store with two saved states, and a way to rewrite the first one's file. */
async function twoStates() {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-guard-auth-'));
  dirs.push(dir);
  const store = new AuthStore(dir, { env: {}, warn: () => {} });
  const a = await store.save('a', data('secret-a'));
  const b = await store.save('b', data('secret-b'));
  const file = (id: string) => join(dir, 'auth-states', `${id}.json`);
  const read = (id: string) => JSON.parse(readFileSync(file(id), 'utf8')) as Sealed;
  const rewriteA = (change: (a: Sealed, b: Sealed) => Sealed) =>
    writeFileSync(file(a.id), JSON.stringify(change(read(a.id), read(b.id))));
  const reopen = () => new AuthStore(dir, { env: {}, warn: () => {} }).get(a.id);
  return { a, b, read, rewriteA, reopen };
}

const b64 = (s: string | undefined) => Buffer.from(s ?? '', 'base64');

describe('auth-state nonces', () => {
  it('are 96 random bits, fresh for every seal of the same state under the same key', () => {
    const key = parseKey(Buffer.alloc(32, 9).toString('base64'), 'test');
    const state: StoredAuthState = {
      id: 'auth_0123456789abcdef',
      name: 'n',
      created_at: '2025-01-01T00:00:00Z',
      updated_at: '2025-01-01T00:00:00Z',
      data: data('same'),
    };
    const ivs = new Set<string>();
    const bodies = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const sealed = JSON.parse(seal(state, key)) as Sealed;
      expect(b64(sealed.iv).length).toBe(12);
      expect(b64(sealed.tag).length).toBe(16);
      ivs.add(sealed.iv!);
      bodies.add(sealed.data);
    }
    expect(ivs.size).toBe(2000);
    expect(bodies.size).toBe(2000);
  });

  it('a state opens with its own nonce and tag (the control)', async () => {
    const { reopen, rewriteA } = await twoStates();
    rewriteA((a) => a); // written back unchanged
    expect(JSON.stringify(reopen().data)).toContain('secret-a');
  });

  it.each<[string, (a: Sealed, b: Sealed) => Sealed]>([
    ['a nonce with one bit changed', (a) => ({ ...a, iv: flip(a.iv) })],
    ["another state's nonce (a reused nonce)", (a, b) => ({ ...a, iv: b.iv })],
    ["another state's nonce and tag", (a, b) => ({ ...a, iv: b.iv, tag: b.tag })],
    ['a nonce cut to 8 bytes', (a) => ({ ...a, iv: b64(a.iv).subarray(0, 8).toString('base64') })],
    ['an empty nonce', (a) => ({ ...a, iv: '' })],
    ['no nonce', (a) => ({ ...a, iv: undefined })],
    ['a tag with one bit changed', (a) => ({ ...a, tag: flip(a.tag) })],
    ['a tag cut to its first 4 bytes', (a) => ({ ...a, tag: cut(a.tag, 4) })],
    ['a tag cut to its first 12 bytes', (a) => ({ ...a, tag: cut(a.tag, 12) })],
    ['an empty tag', (a) => ({ ...a, tag: '' })],
    ['no tag', (a) => ({ ...a, tag: undefined })],
  ])('a state with %s does not open', async (_what, change) => {
    const { rewriteA, reopen } = await twoStates();
    rewriteA(change);
    expect(() => reopen()).toThrow(/cannot be read/);
  });
});

function flip(s: string | undefined): string {
  const bytes = b64(s);
  bytes[bytes.length - 1]! ^= 1;
  return bytes.toString('base64');
}

function cut(s: string | undefined, n: number): string {
  return b64(s).subarray(0, n).toString('base64');
}
