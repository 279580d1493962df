/**
 * The auth-state store (auth-states/store.ts) held to its caps and to its backend's truth:
 * a save past the count or the sealed bytes kept answers 507 naming the cap, exactly at the
 * boundary (a replacement is charged only its growth); a re-seal under a new key is never held
 * to them; a read-only store writes nothing even on a backend that would take it; a backend
 * without `loadSync` (a database) is read before `ready`; a store not `shared` goes by what it
 * loaded; an id that is no state id never reaches the backend.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FileAuthStateBackend,
  type AuthStateBackend,
} from '../../src/server/auth-states/backend.js';
import { AuthStore, seal, type StoredAuthState } from '../../src/server/auth-states/store.js';
import { parseKey } from '../../src/server/auth-states/secret-key.js';
import type { BrowserAuthData } from '../../src/server/instances/runtime.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-authcaps-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const data = (value: string): BrowserAuthData => ({
  cookies: [{ name: 'sid', value, domain: 'example.test', path: '/' }],
  localStorage: {},
  sessionStorage: {},
  indexedDB: {},
});
const keyText = () => randomBytes(32).toString('hex');

/** A file backend seen as a database sees it: no `loadSync`, everything async. */
class AsyncOnly implements AuthStateBackend {
  constructor(readonly inner: FileAuthStateBackend) {}
  list = () => this.inner.list();
  read = (id: string) => this.inner.read(id);
  write = (id: string, sealed: string) => this.inner.write(id, sealed);
  delete = (id: string) => this.inner.delete(id);
}

/** What a client is told when `p` rejects. */
async function refusal(p: Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as Error & { status?: number };
    return { status: e.status ?? 500, message: e.message };
  }
  throw new Error('it did not refuse');
}

/** The sealed size of one state of `value` (ids, dates and nonces are of fixed length). */
async function sizeOf(value: string): Promise<number> {
  const store = new AuthStore(tempDir(), { env: { BURROW_SECRET_KEY: keyText() }, warn: () => {} });
  await store.save('s', data(value));
  return store.usage().bytes;
}

describe('the caps', () => {
  it('count: the cap-th state is taken, the next is a 507 naming the cap; a replacement at the cap is taken', async () => {
    const store = new AuthStore(tempDir(), {
      env: {},
      warn: () => {},
      caps: { count: 2, bytes: Infinity },
    });
    const a = await store.save('a', data('1'));
    await store.save('b', data('2'));
    expect(await refusal(store.save('c', data('3')))).toEqual({
      status: 507,
      message:
        'No room for an auth state: 2 auth states are kept, the cap is 2; delete some to make room',
    });
    expect(await refusal(store.upsert('c', data('3')))).toMatchObject({ status: 507 });
    expect(store.list().map((s) => s.name)).toEqual(['a', 'b']);
    // replacing one does not add one
    await store.overwrite(a.id, data('changed'));
    await store.upsert('b', data('changed'));
    expect(store.get(a.id).data).toEqual(data('changed'));
    await store.delete(a.id);
    await store.save('c', data('3'));
  });

  it('bytes: exactly the cap is taken, a few bytes past it are a 507; a replacement is charged its growth only', async () => {
    const size = await sizeOf('x'.repeat(100));
    const store = new AuthStore(tempDir(), {
      env: {},
      warn: () => {},
      caps: { count: 100, bytes: 2 * size },
    });
    const a = await store.save('a', data('x'.repeat(100)));
    await store.save('b', data('y'.repeat(100)));
    expect(store.usage().bytes).toBe(2 * size);
    const past = await refusal(store.save('c', data('z')));
    expect(past.status).toBe(507);
    expect(past.message).toMatch(
      new RegExp(
        `^No room for an auth state: with it the auth states would take \\d+ bytes, ` +
          `the cap is ${2 * size}; delete some to make room$`,
      ),
    );
    // the same size again fits where the old one was; a few bytes more do not (three more
    // plaintext bytes are four more base64 characters)
    await store.overwrite(a.id, data('w'.repeat(100)));
    expect(store.get(a.id).data).toEqual(data('w'.repeat(100)));
    expect(await refusal(store.overwrite(a.id, data('w'.repeat(103))))).toMatchObject({
      status: 507,
      message: expect.stringContaining(`would take ${2 * size + 4} bytes`),
    });
    expect(store.get(a.id).data).toEqual(data('w'.repeat(100)));
    expect(store.usage()).toEqual({ count: 2, bytes: 2 * size });
  });

  it("a project's own caps are none unless given (a single server's store is its one project)", () => {
    const none = new AuthStore(tempDir(), { env: {}, warn: () => {} });
    expect(none.projectCaps).toEqual({ count: Infinity, bytes: Infinity });
    const given = { count: 3, bytes: 4096 };
    const capped = new AuthStore(tempDir(), { env: {}, warn: () => {}, projectCaps: given });
    expect(capped.projectCaps).toEqual(given);
  });

  it('a re-seal under a new key is not held to them: states kept past a lowered cap still move', async () => {
    const dir = tempDir();
    const oldKey = keyText();
    const writer = new AuthStore(dir, { env: { BURROW_SECRET_KEY: oldKey }, warn: () => {} });
    const { id } = await writer.save('kept', data('v'.repeat(200)));
    const before = writer.usage();
    const newKey = keyText();
    const opened = new AuthStore(dir, {
      env: { BURROW_SECRET_KEY: newKey, BURROW_OLD_SECRET_KEY: oldKey },
      warn: () => {},
      caps: { count: 1, bytes: before.bytes - 1 },
    });
    await opened.ready;
    const file = JSON.parse(readFileSync(join(dir, 'auth-states', `${id}.json`), 'utf8')) as {
      key_id: string;
    };
    expect(file.key_id).toBe(parseKey(newKey, 'new').id);
    expect(opened.get(id).data).toEqual(data('v'.repeat(200)));
  });
});

describe('a read-only store', () => {
  it('writes and deletes nothing, even on a backend that would take it', async () => {
    const dir = tempDir();
    const env = { BURROW_SECRET_KEY: keyText() };
    const { id } = await new AuthStore(dir, { env, warn: () => {} }).save('x', data('x'));
    const writable = new FileAuthStateBackend(join(dir, 'auth-states'));
    const reader = new AuthStore(dir, { env, warn: () => {}, readOnly: true, backend: writable });
    const msg = 'this auth-state store was opened read-only';
    await expect(reader.save('y', data('y'))).rejects.toThrow(msg);
    await expect(reader.upsert('x', data('y'))).rejects.toThrow(msg);
    await expect(reader.overwrite(id, data('y'))).rejects.toThrow(msg);
    await expect(reader.delete(id)).rejects.toThrow(msg);
    expect(await writable.list()).toEqual([id]);
    expect(new AuthStore(dir, { env, warn: () => {} }).get(id).data).toEqual(data('x'));
  });
});

describe('a backend without loadSync', () => {
  it('is read whole before ready: states listed, plaintext ones re-sealed, unreadable ones named', async () => {
    const dir = tempDir();
    const env = { BURROW_SECRET_KEY: keyText() };
    const { id } = await new AuthStore(dir, { env, warn: () => {} }).save('x', data('x'));
    const legacy: StoredAuthState = {
      id: 'auth_00000000000000aa',
      name: 'old',
      created_at: '2020-01-01T00:00:00.000Z',
      updated_at: '2020-01-01T00:00:00.000Z',
      data: data('legacy'),
    };
    const files = new FileAuthStateBackend(join(dir, 'auth-states'));
    await files.write(legacy.id, JSON.stringify(legacy));
    await files.write('auth_00000000000000ff', 'damaged');
    const warned: string[] = [];
    const store = new AuthStore(dir, {
      env,
      warn: (m) => warned.push(m),
      backend: new AsyncOnly(files),
    });
    await store.ready;
    expect(store.list()).toEqual([
      { id: legacy.id, name: 'old' },
      { id, name: 'x' },
      { id: 'auth_00000000000000ff', name: null },
    ]);
    expect(JSON.parse((await files.read(legacy.id))!)).toMatchObject({ burrow_auth_state: 2 });
    expect(warned.join('\n')).toContain('auth_00000000000000ff');
  });

  it('a record gone between the listing and its read is not a state', async () => {
    const dir = tempDir();
    const files = new FileAuthStateBackend(join(dir, 'auth-states'));
    // another node deleted auth_…01 after listing it
    const racing = new AsyncOnly(files);
    racing.list = async () => ['auth_0000000000000001'];
    const store = new AuthStore(dir, { env: {}, warn: () => {}, backend: racing });
    await store.ready;
    expect(store.list()).toEqual([]);
    expect(store.usage()).toEqual({ count: 0, bytes: 0 });
  });
});

describe('a store not shared', () => {
  it('goes by what it loaded: what another process saved is neither replaced, overwritten nor deleted', async () => {
    const dir = tempDir();
    const env = { BURROW_SECRET_KEY: keyText() };
    const one = new AuthStore(dir, { env, warn: () => {} });
    const two = new AuthStore(dir, { env, warn: () => {} });
    const { id } = await one.save('login', data('one'));
    expect(await refusal(two.overwrite(id, data('two')))).toMatchObject({ status: 404 });
    expect(await refusal(two.delete(id))).toMatchObject({ status: 404 });
    const made = await two.upsert('login', data('two'));
    expect(made.id).not.toBe(id);
    expect(new AuthStore(dir, { env, warn: () => {} }).get(id).data).toEqual(data('one'));
  });
});

describe('records read again (refresh)', () => {
  it('one no key opens answers 503 with the reason, listed in id order whatever order it came in', async () => {
    const dir = tempDir();
    const env = { BURROW_SECRET_KEY: keyText() };
    const store = new AuthStore(dir, { env, warn: () => {}, shared: true });
    const foreign = { current: parseKey(keyText(), 'other'), old: [] };
    const at = new Date().toISOString();
    const ids = ['auth_000000000000000b', 'auth_000000000000000a'];
    const files = new FileAuthStateBackend(join(dir, 'auth-states'));
    for (const id of ids) {
      await files.write(
        id,
        seal({ id, name: id, created_at: at, updated_at: at, data: data(id) }, foreign.current),
      );
      await store.refresh(id); // the other node's notice, b before a
    }
    expect(store.list()).toEqual([...ids].sort().map((id) => ({ id, name: null })));
    expect(await refusal(store.fetch(ids[0]!))).toMatchObject({
      status: 503,
      message: expect.stringContaining('it was sealed with another secret key'),
    });
  });

  it('refreshAll reads again every record the backend or the store has', async () => {
    const dir = tempDir();
    const env = { BURROW_SECRET_KEY: keyText() };
    const one = new AuthStore(dir, { env, warn: () => {} });
    const two = new AuthStore(dir, { env, warn: () => {} });
    const gone = await one.save('gone', data('1'));
    const three = new AuthStore(dir, { env, warn: () => {} });
    const made = await two.save('made', data('2'));
    await one.delete(gone.id);
    await three.refreshAll();
    expect(three.list()).toEqual([{ id: made.id, name: 'made' }]);
  });

  it('an id that is no state id is a 404 and never a path the backend opens', async () => {
    const dir = tempDir();
    const env = { BURROW_SECRET_KEY: keyText() };
    const store = new AuthStore(dir, { env, warn: () => {}, shared: true });
    // a file beside the states that a path-shaped or bare id would name
    writeFileSync(join(dir, 'auth-states', 'notes.json'), '{"not":"a state"}');
    for (const id of ['../secret-key', 'notes', 'auth_../../x']) {
      expect(await refusal(store.fetch(id)), id).toMatchObject({ status: 404 });
      expect(await refusal(store.delete(id)), id).toMatchObject({ status: 404 });
    }
    await store.refresh('notes');
    expect(store.list()).toEqual([]);
  });
});

describe('the keyring', () => {
  it('is the one the states are sealed with (what other sealed records of the server use)', async () => {
    const dir = tempDir();
    const env = { BURROW_SECRET_KEY: keyText() };
    const store = new AuthStore(dir, { env, warn: () => {} });
    expect(store.keyring.current.id).toBe(store.keyId);
    expect(store.keyring.current.id).toBe(parseKey(env.BURROW_SECRET_KEY, 'env').id);
  });
});
