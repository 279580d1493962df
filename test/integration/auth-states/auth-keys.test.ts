/**
 * The secret key as an operator meets it, over HTTP on real servers: states saved under one key
 * file; a server started with another key still starts, lists them with a null name and answers
 * 503 `auth_state_unreadable` (naming the key ids, never a key) instead of crashing; given the
 * first key as `oldSecretKeyFiles`, it reads them and re-encrypts them, so the old key can go;
 * a key file that is not a key stops the start with a message naming the file.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { testServer } from '../../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'bak-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const keyFile = (name: string) => {
  const path = join(dir, name);
  writeFileSync(path, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  return path;
};
const state = {
  cookies: [{ name: 'sid', value: 'live-session', domain: '127.0.0.1', path: '/' }],
  origins: [{ origin: 'http://127.0.0.1:9', localStorage: [{ name: 't', value: 'x' }] }],
};

describe('secret keys', () => {
  it('wrong key: a clear 503 per state; old key given: read and re-encrypted', async () => {
    const dataDir = join(dir, 'data');
    const keyA = keyFile('a.key');
    const keyB = keyFile('b.key');
    let id: string;
    {
      await using a = await testServer({ dataDir, secretKeyFile: keyA });
      const res = await a.api('/v1/auth_states/import?name=site', { json: state });
      id = ((await res.json()) as { auth_state_id: string }).auth_state_id;
    }
    const file = join(dataDir, 'auth-states', `${id}.json`);
    expect(readFileSync(file, 'utf8')).not.toContain('live-session');

    {
      await using b = await testServer({ dataDir, secretKeyFile: keyB });
      expect(await (await b.api('/v1/auth_states')).json()).toEqual([{ id, name: null }]);
      const res = await b.api(`/v1/auth_states/${id}/storage_state`);
      expect(res.status).toBe(503);
      expect(res.headers.get('x-burrow-error')).toBe('auth_state_unreadable');
      const { detail } = (await res.json()) as { detail: string };
      expect(detail).toMatch(
        new RegExp(
          `^Auth state ${id} cannot be read: it was sealed with another secret key \\(key id [0-9a-f]{16}; this server's is [0-9a-f]{16}\\)`,
        ),
      );
      expect(detail).not.toContain(readFileSync(keyA, 'utf8').trim());
    }

    {
      await using b = await testServer({ dataDir, secretKeyFile: keyB, oldSecretKeyFiles: [keyA] });
      const res = await b.api(`/v1/auth_states/${id}/storage_state`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as typeof state).cookies[0]?.value).toBe('live-session');
    }
    {
      // re-encrypted under B at that start: B alone reads it now
      await using b = await testServer({ dataDir, secretKeyFile: keyB });
      expect(await (await b.api('/v1/auth_states')).json()).toEqual([{ id, name: 'site' }]);
    }
  });

  it('a key file that holds no key stops the start, naming the file', async () => {
    const bad = join(dir, 'bad.key');
    writeFileSync(bad, 'not-a-key\n', { mode: 0o600 });
    await expect(testServer({ dataDir: join(dir, 'd2'), secretKeyFile: bad })).rejects.toThrow(
      /^--secret-key-file \(.*bad\.key, key 1\): a secret key is 32 bytes/,
    );
  });
});
