/**
 * Where the auth-state key comes from (src/server/auth-states/secret-key.ts) and what the store makes of the
 * files it finds (src/server/auth-states/store.ts), at their edges: the exact spellings a key may take,
 * key files with comments and CRLF, the source an error names (and never the key), old keys from
 * every source deduplicated, rotation keeping every earlier key, files that are not states, and
 * the reasons an unreadable state gives. Real files in temporary directories.
 */
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuthStore, seal, type StoredAuthState } from '../../src/server/auth-states/store.js';
import type { HttpError } from '../../src/server/errors.js';
import {
  keyId,
  loadKeyring,
  parseKey,
  rotateDataDirKey,
} from '../../src/server/auth-states/secret-key.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-keysrc-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const bytes = () => randomBytes(32);
const b64 = (b: Buffer) => b.toString('base64');
const keyFile = (dir: string, text: string, mode = 0o600) => {
  const path = join(dir, `k-${randomBytes(4).toString('hex')}`);
  writeFileSync(path, text, { mode });
  chmodSync(path, mode);
  return path;
};
const thrown = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  return 'no error';
};

describe('parseKey', () => {
  it('takes 64 hex digits in either case, and base64 with or without its padding', () => {
    const b = bytes();
    const id = keyId(b);
    expect(parseKey(b.toString('hex'), 's').id).toBe(id);
    expect(parseKey(b.toString('hex').toUpperCase(), 's').id).toBe(id);
    expect(parseKey(b64(b), 's').id).toBe(id);
    expect(parseKey(b64(b).replace(/=$/, ''), 's').id).toBe(id);
    expect(parseKey(b.toString('base64url'), 's').id).toBe(id);
    expect(parseKey(`  ${b64(b)}\n`, 's').bytes.equals(b)).toBe(true);
    expect(parseKey(b64(b), 'the source')).toMatchObject({ source: 'the source' });
  });

  it('refuses anything longer, shorter or around a key, naming the source and not the text', () => {
    const b = bytes();
    const hex = b.toString('hex');
    const text = b64(b);
    for (const bad of [
      `0${hex}`,
      `${hex}0`,
      hex.slice(1),
      `x${text}`,
      `${text}=`,
      `${text.slice(0, 43)}A`,
      `${text.slice(0, 42)}=`,
      `${hex.slice(0, 32)} ${hex.slice(32)}`,
      '',
    ]) {
      const message = thrown(() => parseKey(bad, 'SRC'));
      expect(message, bad).toBe(
        'SRC: a secret key is 32 bytes written as 64 hex digits or base64 (openssl rand -base64 32)',
      );
      if (bad.length > 8) expect(message).not.toContain(bad.slice(2, 10));
    }
  });

  it('gives an id that is 16 hex digits, the same for the same bytes, and not part of the key', () => {
    const b = bytes();
    expect(keyId(b)).toMatch(/^[0-9a-f]{16}$/);
    expect(keyId(Buffer.from(b))).toBe(keyId(b));
    expect(keyId(bytes())).not.toBe(keyId(b));
    expect(b.toString('hex')).not.toContain(keyId(b));
  });
});

describe('key files', () => {
  it('skip blank lines and comments, in CRLF files too; number the keys in errors', () => {
    const dir = tempDir();
    const a = bytes();
    const file = keyFile(dir, `# the current key\r\n\r\n  ${b64(a)}  \r\n   # trailing note\r\n`);
    expect(loadKeyring(dir, { secretKeyFile: file, env: {} }).current.id).toBe(keyId(a));
    const two = keyFile(dir, `${b64(a)}\nnot-a-key\n`);
    expect(
      thrown(() => loadKeyring(dir, { oldSecretKeyFiles: [two], env: {}, secretKeyFile: file })),
    ).toBe(
      `--old-secret-key-file (${two}, key 2): a secret key is 32 bytes written as 64 hex digits or base64 (openssl rand -base64 32)`,
    );
  });

  it('refuse a file with no key, with two keys where one is meant, or that cannot be read', () => {
    const dir = tempDir();
    const none = keyFile(dir, '# nothing here\n\n');
    expect(thrown(() => loadKeyring(dir, { secretKeyFile: none, env: {} }))).toBe(
      `--secret-key-file: ${none} holds no key`,
    );
    const two = keyFile(dir, `${b64(bytes())}\n${b64(bytes())}\n`);
    expect(thrown(() => loadKeyring(dir, { secretKeyFile: two, env: {} }))).toBe(
      `--secret-key-file: ${two} must hold one key`,
    );
    expect(thrown(() => loadKeyring(dir, { env: { BURROW_SECRET_KEY_FILE: two } }))).toBe(
      `BURROW_SECRET_KEY_FILE: ${two} must hold one key`,
    );
    const missing = join(dir, 'missing');
    expect(thrown(() => loadKeyring(dir, { secretKeyFile: missing, env: {} }))).toBe(
      `--secret-key-file: cannot read ${missing} (ENOENT)`,
    );
  });

  it('warn when other users can read them, and only then', () => {
    const dir = tempDir();
    const warn = vi.spyOn(console, 'error').mockImplementation(() => {});
    const open = keyFile(dir, `${b64(bytes())}\n`, 0o644);
    loadKeyring(dir, { secretKeyFile: open, env: {} });
    expect(warn.mock.calls).toEqual([
      [`burrow: warning: ${open} can be read by other users (chmod 600 it)`],
    ]);
    warn.mockClear();
    loadKeyring(dir, { secretKeyFile: keyFile(dir, `${b64(bytes())}\n`, 0o600), env: {} });
    loadKeyring(dir, { secretKeyFile: keyFile(dir, `${b64(bytes())}\n`, 0o640), env: {} });
    expect(warn).toHaveBeenCalledTimes(1);
  });
});

describe('loadKeyring', () => {
  it('without any key: generates one (0600) unless told not to; an empty variable is no key', () => {
    const dir = tempDir();
    expect(thrown(() => loadKeyring(dir, { env: {}, generate: false }))).toBe(
      `no secret key: ${join(dir, 'secret-key')} does not exist`,
    );
    const k = loadKeyring(dir, { env: { BURROW_SECRET_KEY: '', BURROW_SECRET_KEY_FILE: '' } });
    expect(k.current.source).toBe(`the data dir key (${join(dir, 'secret-key')}, key 1)`);
    expect(readFileSync(join(dir, 'secret-key'), 'utf8')).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
    expect(loadKeyring(dir, { env: {}, generate: false }).current.id).toBe(k.current.id);
    expect(k.old).toEqual([]);
    expect(k.dataDirOldFile).toBeUndefined();
  });

  it('takes old keys from every source, in order, once each, never the current one', () => {
    const dir = tempDir();
    const [cur, o1, o2, o3, o4, o5] = [bytes(), bytes(), bytes(), bytes(), bytes(), bytes()];
    const oldFile = keyFile(dir, `${b64(o1)}\n${b64(o2)}\n${b64(cur)}\n`);
    const envOldFile = keyFile(dir, `${b64(o4)}\n${b64(o1)}\n`);
    writeFileSync(join(dir, 'secret-key.old'), `${b64(o5)}\n`, { mode: 0o600 });
    const k = loadKeyring(dir, {
      env: {
        BURROW_SECRET_KEY: b64(cur),
        BURROW_OLD_SECRET_KEY: ` ${b64(o3)},${b64(o2)}\n\t${b64(o3)} , `,
        BURROW_OLD_SECRET_KEY_FILE: envOldFile,
      },
      oldSecretKeyFiles: [oldFile],
    });
    expect(k.current).toMatchObject({ id: keyId(cur), source: 'BURROW_SECRET_KEY' });
    expect(k.old.map((o) => o.id)).toEqual([o1, o2, o3, o4, o5].map(keyId));
    expect(k.old.map((o) => o.source)).toEqual([
      `--old-secret-key-file (${oldFile}, key 1)`,
      `--old-secret-key-file (${oldFile}, key 2)`,
      'BURROW_OLD_SECRET_KEY (key 1)',
      `BURROW_OLD_SECRET_KEY_FILE (${envOldFile}, key 1)`,
      `the data dir old key (${join(dir, 'secret-key.old')}, key 1)`,
    ]);
    expect(k.dataDirOldFile).toBe(join(dir, 'secret-key.old'));
    expect(
      thrown(() => loadKeyring(dir, { env: { BURROW_OLD_SECRET_KEY: `${b64(o1)} nope` } })),
    ).toMatch(/^BURROW_OLD_SECRET_KEY \(key 2\): a secret key is 32 bytes/);
  });

  it('a key file beats the environment; both variables at once is an error', () => {
    const dir = tempDir();
    const a = bytes();
    const file = keyFile(dir, `${b64(a)}\n`);
    const env = { BURROW_SECRET_KEY: b64(bytes()), BURROW_SECRET_KEY_FILE: file };
    expect(loadKeyring(dir, { secretKeyFile: file, env }).current.source).toBe(
      `--secret-key-file (${file}, key 1)`,
    );
    expect(thrown(() => loadKeyring(dir, { env }))).toBe(
      'set BURROW_SECRET_KEY or BURROW_SECRET_KEY_FILE, not both',
    );
    expect(loadKeyring(dir, { env: { BURROW_SECRET_KEY_FILE: file } }).current).toMatchObject({
      id: keyId(a),
      source: `BURROW_SECRET_KEY_FILE (${file}, key 1)`,
    });
  });

  it('rotation keeps every earlier key and refuses a data dir without a generated key', () => {
    const dir = tempDir();
    expect(thrown(() => rotateDataDirKey(dir))).toBe(
      `${join(dir, 'secret-key')} does not exist: this data dir has no generated key to rotate`,
    );
    const first = loadKeyring(dir, { env: {} }).current.id;
    const r1 = rotateDataDirKey(dir);
    const r2 = rotateDataDirKey(dir);
    expect(r1.oldId).toBe(first);
    expect(r2.oldId).toBe(r1.newId);
    const k = loadKeyring(dir, { env: {} });
    expect(k.current.id).toBe(r2.newId);
    expect(k.old.map((o) => o.id)).toEqual([first, r1.newId]);
    expect(readFileSync(join(dir, 'secret-key.old'), 'utf8').split('\n')).toHaveLength(3);
  });
});

describe('what the store makes of the files it finds', () => {
  const quiet = { warn: () => {} };
  const state = (id: string, name: string, created: string): StoredAuthState => ({
    id,
    name,
    created_at: created,
    updated_at: created,
    data: { cookies: [], localStorage: {}, sessionStorage: {}, indexedDB: {} },
  });

  it('reads only files named auth_<16 hex>.json', async () => {
    const dir = tempDir();
    const key = loadKeyring(dir, { env: {} }).current;
    const states = join(dir, 'auth-states');
    mkdirSync(states);
    const id = 'auth_0123456789abcdef';
    for (const name of [
      `${id}.json`,
      `x${id}.json`,
      `auth_0123456789abcdef0.json`,
      id,
      `${id}.json.bak`,
      `auth_0123456789ABCDEF.json`,
    ]) {
      const fileId = name.replace(/\.json$/, '');
      writeFileSync(join(states, name), seal(state(fileId, name, '2024-01-01T00:00:00Z'), key));
    }
    const store = new AuthStore(dir, { env: {}, ...quiet });
    expect(store.list()).toEqual([{ id, name: `${id}.json` }]);
  });

  it('says why a file is unreadable, keeps it, and can delete it', async () => {
    const dir = tempDir();
    const key = loadKeyring(dir, { env: {} }).current;
    const states = join(dir, 'auth-states');
    mkdirSync(states);
    const ids = ['auth_000000000000000a', 'auth_000000000000000b', 'auth_000000000000000c'];
    writeFileSync(join(states, `${ids[0]}.json`), '{"burrow_auth_state": 2, "key_id"');
    writeFileSync(join(states, `${ids[1]}.json`), JSON.stringify({ burrow_auth_state: 3 }));
    writeFileSync(
      join(states, `${ids[2]}.json`),
      JSON.stringify({ ...state('auth_00000000000000ff', 'moved', '2024-01-01T00:00:00Z') }),
    );
    const nullData = 'auth_000000000000000d';
    writeFileSync(
      join(states, `${nullData}.json`),
      JSON.stringify({ ...state(nullData, 'x', '2024-01-01T00:00:00Z'), data: null }),
    );
    const good = 'auth_0000000000000001';
    writeFileSync(
      join(states, `${good}.json`),
      seal(state(good, 'ok', '2024-01-01T00:00:00Z'), key),
    );
    const warnings: string[] = [];
    const store = new AuthStore(dir, { env: {}, warn: (m) => warnings.push(m) });
    await store.ready;
    const reason = (id: string) => {
      try {
        store.get(id);
      } catch (err) {
        return `${(err as HttpError).status} ${(err as HttpError).detail}`;
      }
      return 'readable';
    };
    expect(reason(ids[0]!)).toContain('the file is not valid JSON (damaged)');
    expect(reason(ids[1]!)).toContain('unknown format 3 (a newer burrow?)');
    expect(reason(ids[2]!)).toContain('the file is not an auth state');
    expect(reason(nullData)).toContain('the file is not an auth state');
    expect(reason(ids[0]!)).toMatch(/^503 /);
    expect(reason(good)).toBe('readable');
    expect(reason('auth_ffffffffffffffff')).toBe(
      '404 Auth state "auth_ffffffffffffffff" not found',
    );
    expect(warnings).toEqual([
      expect.stringMatching(
        /^4 auth state\(s\) cannot be read and are left untouched: auth_000000000000000a: the file is not valid JSON \(damaged\); auth_000000000000000b: unknown format 3/,
      ),
    ]);
    expect(store.list().map((s) => [s.id, s.name])).toEqual([
      [good, 'ok'],
      [ids[0], null],
      [ids[1], null],
      [ids[2], null],
      [nullData, null],
    ]);
    await store.delete(ids[1]!);
    expect(existsSync(join(states, `${ids[1]}.json`))).toBe(false);
    expect(reason(ids[1]!)).toMatch(/^404 /);
    await expect(store.delete('auth_ffffffffffffffff')).rejects.toMatchObject({ status: 404 });
    // the rotated-out key file stays while a state may still need it
    expect(new AuthStore(dir, { env: {}, ...quiet }).list()).toHaveLength(4);
  });

  it('keeps the old key file while some state cannot be read', async () => {
    const dir = tempDir();
    loadKeyring(dir, { env: {} });
    rotateDataDirKey(dir);
    mkdirSync(join(dir, 'auth-states'));
    writeFileSync(join(dir, 'auth-states', 'auth_000000000000000a.json'), 'damaged');
    const store = new AuthStore(dir, { env: {}, ...quiet });
    await store.ready;
    expect(existsSync(join(dir, 'secret-key.old'))).toBe(true);
  });

  it('lists by creation time, then id; an overwrite without a name keeps it', async () => {
    const dir = tempDir();
    const key = loadKeyring(dir, { env: {} }).current;
    mkdirSync(join(dir, 'auth-states'));
    const rows: [string, string, string][] = [
      ['auth_0000000000000003', 'c', '2024-01-02T00:00:00Z'],
      ['auth_0000000000000002', 'b', '2024-01-01T00:00:00Z'],
      ['auth_0000000000000001', 'a', '2024-01-02T00:00:00Z'],
    ];
    for (const [id, name, at] of rows) {
      writeFileSync(join(dir, 'auth-states', `${id}.json`), seal(state(id, name, at), key));
    }
    const store = new AuthStore(dir, { env: {}, ...quiet });
    expect(store.list().map((s) => s.name)).toEqual(['b', 'a', 'c']);
    const data = { cookies: [], localStorage: {}, sessionStorage: {}, indexedDB: {} };
    expect(await store.overwrite('auth_0000000000000003', data)).toEqual({
      id: 'auth_0000000000000003',
      name: 'c',
    });
    expect(await store.overwrite('auth_0000000000000003', data, 'renamed')).toMatchObject({
      name: 'renamed',
    });
  });
});
