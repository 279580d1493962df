/**
 * The auth-state directory as the store finds it and leaves it: the directory is private and the
 * temp files of a killed write are swept; only `<id>.json` files are states (a stray file, a
 * backup, a plaintext file claiming another id or holding no object is never listed as, or
 * opened as, a state); unreadable states are listed in a stable order, each with a reason that
 * tells the operator what to do; a file sealed in a form `seal` never writes does not open; the store is quiet when all is
 * well and loud on stderr when not; deleting a state whose file is already gone, or finishing a
 * key rotation whose old key file is already gone, does not fail.
 */
import { createCipheriv, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuthStore, type StoredAuthState } from '../../src/server/auth-states/store.js';
import type { BrowserAuthData } from '../../src/server/instances/runtime.js';
import { parseKey, type Keyring } from '../../src/server/auth-states/secret-key.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-authdir-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const quiet = { env: {}, warn: () => {} };
const data = (value: string): BrowserAuthData => ({
  cookies: [{ name: 'sid', value, domain: 'example.test', path: '/' }],
  localStorage: {},
  sessionStorage: {},
  indexedDB: {},
});
const statesDir = (dir: string) => join(dir, 'auth-states');
const stateFile = (dir: string, id: string) => join(statesDir(dir), `${id}.json`);

/** Why `get(id)` refuses, as the client reads it. */
function refusal(store: AuthStore, id: string): string {
  try {
    store.get(id);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`${id} opened`);
}

describe('the directory', () => {
  it('is private to the server user, and a killed write leaves no temp file past the next open', async () => {
    const dir = tempDir();
    mkdirSync(statesDir(dir));
    // what a process killed between creating its temp file and renaming it leaves behind
    const temp = join(statesDir(dir), '.auth_0123456789abcdef.json.0123456789ab.tmp');
    writeFileSync(temp, 'half a state');
    const store = new AuthStore(join(dir, 'fresh'), quiet);
    await store.save('x', data('x'));
    expect(statSync(statesDir(join(dir, 'fresh'))).mode & 0o777).toBe(0o700);
    new AuthStore(dir, quiet);
    expect(existsSync(temp)).toBe(false);
  });

  it('holds states only in files named <id>.json: stray files, backups and odd names are not states', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, quiet);
    const { id } = await store.save('real', data('real'));
    const sealed = readFileSync(stateFile(dir, id), 'utf8');
    for (const name of [
      'README',
      id, // no extension
      `${id}.json.bak`,
      `${id}.jsonx`,
      'auth_01234567.json89abcdef', // `.json` in the middle of a valid id
      'auth_XYZ.json',
      'auth_0123456789abcdef0.json',
    ]) {
      writeFileSync(join(statesDir(dir), name), sealed);
    }
    // a file named like an id but without `.json`, that is no state at all
    writeFileSync(join(statesDir(dir), 'auth_ffffffffffffffff'), 'not a state');
    const warn = vi.fn();
    const reopened = new AuthStore(dir, { env: {}, warn });
    expect(reopened.list()).toEqual([{ id, name: 'real' }]);
    expect(warn).not.toHaveBeenCalled();
  });

  it('a plaintext (burrow 0.1) file that names another id than its file is not a state', () => {
    const dir = tempDir();
    mkdirSync(statesDir(dir), { recursive: true });
    const claimed = 'auth_aaaaaaaaaaaaaaaa';
    const file = 'auth_bbbbbbbbbbbbbbbb';
    const legacy = {
      id: claimed,
      name: 'planted',
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
      data: data('planted'),
    };
    writeFileSync(stateFile(dir, file), JSON.stringify(legacy));
    const store = new AuthStore(dir, quiet);
    expect(store.list()).toEqual([{ id: file, name: null }]);
    expect(refusal(store, file)).toContain('the file is not an auth state');
    expect(() => store.get(claimed)).toThrow(/not found/);
  });

  it('a plaintext file of its own id whose data is not an object is not a state', () => {
    const dir = tempDir();
    mkdirSync(statesDir(dir), { recursive: true });
    const id = 'auth_cccccccccccccccc';
    const base = { id, name: 'odd', created_at: '2026-01-01T00:00:00.000Z' };
    writeFileSync(stateFile(dir, id), JSON.stringify({ ...base, data: 'cookies' }));
    const store = new AuthStore(dir, quiet);
    expect(store.list()).toEqual([{ id, name: null }]);
    expect(refusal(store, id)).toContain('the file is not an auth state');
  });
});

describe('unreadable states', () => {
  it('are listed after the readable ones, in id order whatever order the files were written in', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, quiet);
    const readable = await store.save('ok', data('ok'));
    mkdirSync(statesDir(dir), { recursive: true });
    // written neither sorted nor reversed: the listing does not depend on how the dir is read
    const ids = ['5', 'b', '1', 'e', '9', '3', 'c', '7', 'a', '0', 'f', '2'].map(
      (c) => `auth_${c.repeat(16)}`,
    );
    for (const id of ids) writeFileSync(stateFile(dir, id), 'not json');
    const reopened = new AuthStore(dir, quiet);
    expect(reopened.list()).toEqual([
      { id: readable.id, name: 'ok' },
      ...[...ids].sort().map((id) => ({ id, name: null })),
    ]);
  });

  it("say what to do about a key that is not configured, naming both keys' ids", async () => {
    const dir = tempDir();
    const keyA = randomBytes(32).toString('hex');
    const { id } = await new AuthStore(dir, {
      env: { BURROW_SECRET_KEY: keyA },
      warn: () => {},
    }).save('x', data('x'));
    const keyB = randomBytes(32).toString('hex');
    const other = new AuthStore(dir, { env: { BURROW_SECRET_KEY: keyB }, warn: () => {} });
    expect(refusal(other, id)).toContain(
      `it was sealed with another secret key (key id ${parseKey(keyA, 'a').id}; this server's is ` +
        `${parseKey(keyB, 'b').id}): configure that key, or pass it as an old key`,
    );
  });

  it('a read-only tool without any key names the key a state needs and a key id of its own', async () => {
    const dir = tempDir();
    const writer = new AuthStore(dir, quiet);
    const { id } = await writer.save('x', data('x'));
    const { id: damaged } = await writer.save('y', data('y'));
    const noKeyId = JSON.parse(readFileSync(stateFile(dir, damaged), 'utf8')) as object;
    writeFileSync(stateFile(dir, damaged), JSON.stringify({ ...noKeyId, key_id: undefined }));
    rmSync(join(dir, 'secret-key'));
    const reader = new AuthStore(dir, { ...quiet, readOnly: true });
    expect(refusal(reader, id)).toMatch(
      new RegExp(`key id ${writer.keyId}; this server's is [0-9a-f]{16}\\)`),
    );
    expect(reader.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect(refusal(reader, damaged)).toContain('it was sealed with another secret key');
  });

  it('a file sealed with the right key but a nonce of another size than seal writes does not open', async () => {
    const dir = tempDir();
    const key = randomBytes(32).toString('hex');
    const store = new AuthStore(dir, { env: { BURROW_SECRET_KEY: key }, warn: () => {} });
    const { id } = await store.save('x', data('x'));
    const state = store.get(id);
    for (const ivBytes of [8, 16]) {
      writeFileSync(stateFile(dir, id), sealWithNonce(state, key, ivBytes));
      const reopened = new AuthStore(dir, { env: { BURROW_SECRET_KEY: key }, warn: () => {} });
      expect(refusal(reopened, id), `${ivBytes}`).toContain(
        'cannot be read: it fails authentication (damaged, or altered)',
      );
    }
    // the control: the same construction with the nonce size seal uses opens
    writeFileSync(stateFile(dir, id), sealWithNonce(state, key, 12));
    expect(
      new AuthStore(dir, { env: { BURROW_SECRET_KEY: key }, warn: () => {} }).get(id).data,
    ).toEqual(data('x'));
  });
});

describe('what the operator is told', () => {
  it('nothing when every state opens', async () => {
    const dir = tempDir();
    await new AuthStore(dir, quiet).save('x', data('x'));
    const warn = vi.fn();
    await new AuthStore(dir, { env: {}, warn }).ready;
    expect(warn).not.toHaveBeenCalled();
  });

  it('on stderr by default, marked as burrow, when a state cannot be read', () => {
    const dir = tempDir();
    mkdirSync(statesDir(dir), { recursive: true });
    writeFileSync(stateFile(dir, 'auth_0123456789abcdef'), '{');
    const stderr = vi.spyOn(console, 'error').mockImplementation(() => {});
    new AuthStore(dir, { env: {} });
    expect(stderr).toHaveBeenCalledTimes(1);
    expect(String(stderr.mock.calls[0]![0])).toMatch(
      /^burrow: 1 auth state\(s\) cannot be read .*auth_0123456789abcdef: the file is not valid JSON/,
    );
  });
});

describe('writes that find the file system changed under them', () => {
  it('a state saved without a name is named "default"', async () => {
    const store = new AuthStore(tempDir(), quiet);
    const saved = await store.save(undefined, data('x'));
    expect(saved.name).toBe('default');
    expect(store.get(saved.id).name).toBe('default');
  });

  it('deleting a state whose file was already removed by hand forgets it', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, quiet);
    const { id } = await store.save('x', data('x'));
    rmSync(stateFile(dir, id));
    await store.delete(id);
    expect(store.list()).toEqual([]);
    expect(() => store.get(id)).toThrow(/not found/);
  });

  it('a rotated-out key file already gone when the re-seal ends does not fail the open', async () => {
    const dir = tempDir();
    const current = parseKey(randomBytes(32).toString('hex'), 'current');
    const keyring: Keyring = { current, old: [], dataDirOldFile: join(dir, 'secret-key.old') };
    const store = new AuthStore(dir, { keyring, warn: () => {} });
    await expect(store.ready).resolves.toBeUndefined();
  });

  it('deleting many states leaves no file open', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, quiet);
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await store.save(`s${i}`, data(String(i)))).id);
    const open = () => readdirSync('/proc/self/fd').length;
    const before = open();
    for (const id of ids) await store.delete(id);
    expect(open() - before).toBeLessThan(10);
    expect(readdirSync(statesDir(dir))).toEqual([]);
  });
});

/** A state sealed as `seal` does but with an `ivBytes`-byte nonce (the file format of auth-store.ts). */
function sealWithNonce(state: StoredAuthState, keyHex: string, ivBytes: number): string {
  const key = parseKey(keyHex, 'test');
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv('aes-256-gcm', key.bytes, iv);
  cipher.setAAD(Buffer.from(`burrow auth state ${state.id}`));
  const body = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
  return JSON.stringify({
    burrow_auth_state: 2,
    key_id: key.id,
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    data: body.toString('base64'),
  });
}
