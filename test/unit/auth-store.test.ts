/**
 * The auth-state store on a real file system: states are sealed (AES-256-GCM) at rest, a key is
 * generated once into the data dir with mode 0600 or taken from a file / the environment, states
 * of burrow 0.1 (plaintext) and of a rotated-out key are re-sealed on open, a wrong key is a
 * clear error (never a crash), concurrent saves are applied in order, and a process killed in the
 * middle of writes loses nothing it had committed.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthStore } from '../../src/server/auth-states/store.js';
import { HttpError } from '../../src/server/errors.js';
import type { BrowserAuthData } from '../../src/server/instances/runtime.js';
import {
  loadKeyring,
  parseKey,
  rotateDataDirKey,
} from '../../src/server/auth-states/secret-key.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'burrow-authstore-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const quiet = { warn: () => {} };
const SECRET = 'sid-value-that-must-not-appear-on-disk';
const data = (value = SECRET): BrowserAuthData => ({
  cookies: [{ name: 'sid', value, domain: 'example.test', path: '/' }],
  localStorage: { 'https://example.test': { token: `tok-${value}` } },
  sessionStorage: {},
  indexedDB: {
    'https://example.test': [
      {
        name: 'db',
        version: 1,
        stores: [
          {
            name: 's',
            autoIncrement: false,
            keyPath: 'k',
            records: [{ value: { k: 1, v: value } }],
            indexes: [],
          },
        ],
      },
    ],
  },
});
const files = (dir: string) =>
  readdirSync(join(dir, 'auth-states')).map((f) => join(dir, 'auth-states', f));
const keyText = () => randomBytes(32).toString('base64');

describe('AuthStore at rest', () => {
  it('seals states: nothing of them is on disk in the clear; a generated key is 0600', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, { env: {}, ...quiet });
    const { id } = await store.save('github', data());
    const [file] = files(dir);
    expect(file).toBe(join(dir, 'auth-states', `${id}.json`));
    const text = readFileSync(file!, 'utf8');
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('github');
    expect(JSON.parse(text)).toMatchObject({ burrow_auth_state: 2, key_id: store.keyId });
    expect(statSync(file!).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'secret-key')).mode & 0o777).toBe(0o600);

    const reopened = new AuthStore(dir, { env: {}, ...quiet });
    expect(reopened.keyId).toBe(store.keyId); // generated once
    expect(reopened.list()).toEqual([{ id, name: 'github' }]);
    expect(reopened.get(id).data).toEqual(data());
  });

  it('a file moved to another id, or altered, does not open', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, { env: {}, ...quiet });
    const a = await store.save('a', data('one'));
    const b = await store.save('b', data('two'));
    const fileA = join(dir, 'auth-states', `${a.id}.json`);
    const fileB = join(dir, 'auth-states', `${b.id}.json`);
    writeFileSync(fileB, readFileSync(fileA)); // swap b's content for a's
    const sealed = JSON.parse(readFileSync(fileA, 'utf8')) as { data: string };
    const bytes = Buffer.from(sealed.data, 'base64');
    bytes[0]! ^= 1;
    writeFileSync(fileA, JSON.stringify({ ...sealed, data: bytes.toString('base64') }));

    const warnings: string[] = [];
    const reopened = new AuthStore(dir, { env: {}, warn: (m) => warnings.push(m) });
    expect(reopened.list()).toEqual([
      { id: [a.id, b.id].sort()[0], name: null },
      { id: [a.id, b.id].sort()[1], name: null },
    ]);
    expect(() => reopened.get(a.id)).toThrow(/cannot be read: it fails authentication/);
    expect(warnings.join()).toContain('2 auth state(s) cannot be read');
  });

  it('a wrong key is a clear 503 per state, not a crash; the right key as an old key re-seals', async () => {
    const dir = tempDir();
    const keyA = keyText();
    const keyB = keyText();
    const a = new AuthStore(dir, { env: { BURROW_SECRET_KEY: keyA }, ...quiet });
    const { id } = await a.save('x', data());

    const wrong = new AuthStore(dir, { env: { BURROW_SECRET_KEY: keyB }, ...quiet });
    expect(wrong.list()).toEqual([{ id, name: null }]);
    let err: unknown;
    try {
      wrong.get(id);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HttpError);
    expect(err).toMatchObject({ status: 503, code: 'auth_state_unreadable' });
    expect((err as Error).message).toContain(`key id ${parseKey(keyA, 't').id}`);
    expect((err as Error).message).not.toContain(keyA);
    // it is left untouched, and can be deleted
    const before = readFileSync(join(dir, 'auth-states', `${id}.json`), 'utf8');
    await wrong.ready;
    expect(readFileSync(join(dir, 'auth-states', `${id}.json`), 'utf8')).toBe(before);

    // rotation: B current, A accepted for reading: the state is re-sealed under B
    const rotated = new AuthStore(dir, {
      env: { BURROW_SECRET_KEY: keyB, BURROW_OLD_SECRET_KEY: keyA },
      ...quiet,
    });
    await rotated.ready;
    expect(rotated.get(id).data).toEqual(data());
    const onlyB = new AuthStore(dir, { env: { BURROW_SECRET_KEY: keyB }, ...quiet });
    expect(onlyB.get(id).data).toEqual(data());

    await wrong.delete(id);
    expect(files(dir)).toEqual([]);
  });

  it('key sources: a file, the environment, both variables at once is an error, bad keys are named', () => {
    const dir = tempDir();
    const file = join(dir, 'k');
    const hex = randomBytes(32).toString('hex');
    writeFileSync(file, `${hex}\n`, { mode: 0o600 });
    expect(loadKeyring(dir, { secretKeyFile: file, env: {} }).current.id).toBe(
      parseKey(hex, 'x').id,
    );
    expect(loadKeyring(dir, { env: { BURROW_SECRET_KEY_FILE: file } }).current.id).toBe(
      parseKey(hex, 'x').id,
    );
    expect(() =>
      loadKeyring(dir, { env: { BURROW_SECRET_KEY: hex, BURROW_SECRET_KEY_FILE: file } }),
    ).toThrow(/not both/);
    expect(() => loadKeyring(dir, { env: { BURROW_SECRET_KEY: 'hunter2' } })).toThrow(
      /^BURROW_SECRET_KEY: a secret key is 32 bytes/,
    );
    expect(() => loadKeyring(dir, { env: { BURROW_SECRET_KEY: 'hunter2' } })).not.toThrow(
      /hunter2/,
    );
    expect(() => loadKeyring(dir, { secretKeyFile: join(dir, 'missing'), env: {} })).toThrow(
      /--secret-key-file: cannot read .*missing \(ENOENT\)/,
    );
    expect(existsSync(join(dir, 'secret-key'))).toBe(false); // given keys generate nothing
  });

  it('burrow 0.1 plaintext states are read and re-sealed on open', async () => {
    const dir = tempDir();
    const id = 'auth_0123456789abcdef';
    const legacy = {
      id,
      name: 'old',
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
      data: { cookies: [{ name: 'sid', value: SECRET }], localStorage: {}, sessionStorage: {} },
    };
    const { mkdirSync } = await import('node:fs');
    mkdirSync(join(dir, 'auth-states'), { recursive: true });
    writeFileSync(join(dir, 'auth-states', `${id}.json`), JSON.stringify(legacy), { mode: 0o600 });

    const store = new AuthStore(dir, { env: {}, ...quiet });
    await store.ready;
    expect(store.list()).toEqual([{ id, name: 'old' }]);
    expect(store.get(id)).toEqual(legacy);
    const text = readFileSync(join(dir, 'auth-states', `${id}.json`), 'utf8');
    expect(text).not.toContain(SECRET);
    expect(new AuthStore(dir, { env: {}, ...quiet }).get(id)).toEqual(legacy);
  });

  it('rotateDataDirKey: a new generated key; the next open re-seals and drops the old key file', async () => {
    const dir = tempDir();
    const first = new AuthStore(dir, { env: {}, ...quiet });
    const { id } = await first.save('x', data());
    const { oldId, newId } = rotateDataDirKey(dir);
    expect(oldId).toBe(first.keyId);
    expect(newId).not.toBe(oldId);
    expect(statSync(join(dir, 'secret-key.old')).mode & 0o777).toBe(0o600);
    // the old server keeps writing under its key meanwhile: still readable after the restart
    const late = await first.save('late', data('late'));

    const next = new AuthStore(dir, { env: {}, ...quiet });
    expect(next.keyId).toBe(newId);
    await next.ready;
    expect(existsSync(join(dir, 'secret-key.old'))).toBe(false);
    for (const f of files(dir)) {
      expect(JSON.parse(readFileSync(f, 'utf8'))).toMatchObject({ key_id: newId });
    }
    const again = new AuthStore(dir, { env: {}, ...quiet });
    expect(again.get(id).data).toEqual(data());
    expect(again.get(late.id).data).toEqual(data('late'));
  });
});

describe('AuthStore read-only', () => {
  it('creates, generates and re-seals nothing; lists names with the key, null names without', async () => {
    const empty = tempDir();
    const none = new AuthStore(empty, { env: {}, readOnly: true, ...quiet });
    expect(none.list()).toEqual([]);
    expect(readdirSync(empty)).toEqual([]); // no key generated, no directory made

    const dir = tempDir();
    const { id } = await new AuthStore(dir, { env: {}, ...quiet }).save('named', data());
    const { mkdirSync } = await import('node:fs');
    const legacyId = 'auth_00000000000000aa';
    mkdirSync(join(dir, 'auth-states'), { recursive: true });
    const legacy = JSON.stringify({
      id: legacyId,
      name: 'old',
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
      data: data(),
    });
    writeFileSync(join(dir, 'auth-states', `${legacyId}.json`), legacy);

    const reader = new AuthStore(dir, { env: {}, readOnly: true, ...quiet });
    await reader.ready;
    expect(reader.list()).toEqual(
      expect.arrayContaining([
        { id, name: 'named' },
        { id: legacyId, name: 'old' },
      ]),
    );
    expect(readFileSync(join(dir, 'auth-states', `${legacyId}.json`), 'utf8')).toBe(legacy);
    await expect(reader.save('x', data())).rejects.toThrow(/read-only/);
    await expect(reader.delete(id)).rejects.toThrow(/read-only/);

    rmSync(join(dir, 'secret-key'));
    const keyless = new AuthStore(dir, { env: {}, readOnly: true, ...quiet });
    expect(keyless.list()).toEqual(
      expect.arrayContaining([
        { id, name: null },
        { id: legacyId, name: 'old' },
      ]),
    );
    expect(existsSync(join(dir, 'secret-key'))).toBe(false);
  });
});

describe('AuthStore writes', () => {
  it('concurrent overwrites of one state apply in call order, on disk as in memory', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, { env: {}, ...quiet });
    const { id } = await store.save('s', data('0'));
    const writes = Array.from({ length: 20 }, (_, i) => store.overwrite(id, data(String(i + 1))));
    await Promise.all(writes);
    expect(store.get(id).data).toEqual(data('20'));
    expect(new AuthStore(dir, { env: {}, ...quiet }).get(id).data).toEqual(data('20'));
  });

  it('upsert: replaces the one state of a name, makes one when none has it, refuses several', async () => {
    const dir = tempDir();
    const store = new AuthStore(dir, { env: {}, ...quiet });
    const [a, b] = await Promise.all([store.upsert('n', data('a')), store.upsert('n', data('b'))]);
    expect(a.id).toBe(b.id); // serialised: the second saw the first
    expect(store.get(a.id).data).toEqual(data('b'));
    await store.save('dup', data());
    await store.save('dup', data());
    await expect(store.upsert('dup', data())).rejects.toMatchObject({
      status: 409,
      code: 'auth_state_name_ambiguous',
      message: expect.stringMatching(/named "dup" \(auth_[0-9a-f]{16}, auth_[0-9a-f]{16}\)/),
    });
    expect((await store.upsert(undefined, data())).name).toBe('default');
  });

  it('a process killed while writing loses nothing it had committed', async () => {
    const dir = tempDir();
    const key = keyText();
    // a real child process saving large states as fast as it can, told to report each commit
    const script = `
      import { AuthStore } from ${JSON.stringify(new URL('../../src/server/auth-states/store.ts', import.meta.url).pathname)};
      const store = new AuthStore(process.env.STORE_DIR, { warn: () => {}, env: process.env });
      const big = 'x'.repeat(2_000_000);
      for (let i = 0; ; i++) {
        const data = { cookies: [{ name: 'n', value: String(i) }], localStorage: { 'https://a.test': { big } }, sessionStorage: {} };
        const { id } = await store.save('s' + i, data);
        process.stdout.write(id + ' ' + i + '\\n');
      }`;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      {
        env: { ...process.env, BURROW_SECRET_KEY: key, STORE_DIR: dir },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      child.on('error', reject);
      child.on('exit', (code) => reject(new Error(`child exited early (${code})`)));
      child.stdout.on('data', (chunk: string) => {
        out += chunk;
        if (out.split('\n').length > 6) {
          child.kill('SIGKILL');
          resolve();
        }
      });
    });
    await new Promise((r) => child.once('close', r));
    const committed = out
      .split('\n')
      .filter((l) => /^auth_[0-9a-f]{16} \d+$/.test(l))
      .map((l) => l.split(' ') as [string, string]);
    expect(committed.length).toBeGreaterThanOrEqual(5);

    const store = new AuthStore(dir, { env: { BURROW_SECRET_KEY: key }, ...quiet });
    for (const [id, i] of committed) {
      expect(store.get(id).data.cookies).toEqual([{ name: 'n', value: i }]);
    }
    // nothing unreadable, no temp file left; at most the one write in flight was lost
    expect(store.list().every((s) => s.name !== null)).toBe(true);
    expect(
      readdirSync(join(dir, 'auth-states')).every((f) => /^auth_[0-9a-f]{16}\.json$/.test(f)),
    ).toBe(true);
    expect(store.list().length - committed.length).toBeLessThanOrEqual(1);
  });
});
