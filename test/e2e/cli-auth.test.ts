/**
 * `burrow auth export | import | delete | rotate-key` as a user runs them, against a real server
 * and (export, delete) on a data dir with no server running:
 * a Playwright storageState file imports under a name (a second import replaces it), exports back
 * to a 0600 file or stdout, deletes by name; rotate-key gives the data dir a new key, and the next
 * server reads the states sealed with the old one and re-encrypts them.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { testServer } from '../helpers/server.js';
import { burrowCli } from './run.js';

const dir = mkdtempSync(join(tmpdir(), 'bca-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const burrow = (args: string[]) => burrowCli(['auth', ...args], join(dir, 'unused'));

const state = (value: string) => ({
  cookies: [
    {
      name: 'sid',
      value,
      domain: 'app.example.test',
      path: '/',
      expires: -1,
      httpOnly: true,
      secure: true,
      sameSite: 'Lax',
    },
  ],
  origins: [
    {
      origin: 'https://app.example.test',
      localStorage: [{ name: 'token', value: `t-${value}` }],
      indexedDB: [
        {
          name: 'firebaseLocalStorageDb',
          version: 1,
          stores: [
            {
              name: 'firebaseLocalStorage',
              autoIncrement: false,
              keyPath: 'fbase_key',
              records: [{ value: { fbase_key: 'k', value: { token: value } } }],
              indexes: [],
            },
          ],
        },
      ],
    },
  ],
});

describe('burrow auth', () => {
  it('import, export, replace by name, delete', async () => {
    await using server = await testServer({ dataDir: join(dir, 'srv') });
    const flags = ['--base-url', server.url, '--api-key', server.apiKey];
    const file = join(dir, 'state.json');
    writeFileSync(file, JSON.stringify(state('one')));

    const imported = await burrow(['import', file, '--name', 'app', '--json', ...flags]);
    expect(imported.stderr).toBe('');
    expect(imported.code).toBe(0);
    const { auth_state_id: id } = JSON.parse(imported.stdout) as { auth_state_id: string };

    const out = join(dir, 'out.json');
    const exported = await burrow(['export', 'app', '--out', out, ...flags]);
    expect(exported.code).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(state('one'));

    writeFileSync(file, JSON.stringify(state('two')));
    const again = await burrow(['import', file, '--name', 'app', ...flags]);
    expect(again.stdout.trim()).toBe(`${id} app`);
    const stdout = await burrow(['export', id, ...flags]);
    expect(JSON.parse(stdout.stdout)).toEqual(state('two'));

    const list = await burrow(['list', ...flags]);
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+app$`, 'm'));

    const notJson = join(dir, 'bad.json');
    writeFileSync(notJson, '{"cookies": [');
    const bad = await burrow(['import', notJson, ...flags]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('is not JSON');

    const deleted = await burrow(['delete', 'app', ...flags]);
    expect(deleted.stdout.trim()).toBe(`deleted ${id}`);
    const missing = await burrow(['export', 'app', ...flags]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('no saved auth state has the id or name "app"');

    const usage = await burrow(['export', ...flags]);
    expect(usage.code).not.toBe(0);
    expect(usage.stderr).toContain('burrow auth export ID_OR_NAME');
  });

  it('export and delete work with no server running, on the data dir as list does', async () => {
    const dataDir = join(dir, 'offline');
    let id: string;
    {
      await using server = await testServer({ dataDir });
      const res = await server.api('/v1/auth_states/import?name=kept', { json: state('four') });
      id = ((await res.json()) as { auth_state_id: string }).auth_state_id;
      // a server runs on the dir (this process): it holds the states, so it must do the delete
      const refused = await burrowCli(['auth', 'delete', 'kept'], dataDir);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`(pid ${process.pid}) runs on the data dir ${dataDir}`);
      await expect(server.api(`/v1/auth_states/${id}/storage_state`)).resolves.toMatchObject({
        status: 200,
      });
    }

    // no server named, none running: BURROW_DATA_DIR is the dir, as for the embedded server
    const exported = await burrowCli(['auth', 'export', 'kept'], dataDir);
    expect(exported.code).toBe(0);
    expect(exported.stderr).toContain(`reading the data dir ${dataDir}`);
    expect(JSON.parse(exported.stdout)).toEqual(state('four'));
    const out = join(dir, 'offline.json');
    const toFile = await burrow(['export', id, '--data-dir', dataDir, '--out', out]);
    expect(toFile.code).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(state('four'));

    // another key opens nothing: the state's name is unknown, its id names the key problem
    const otherKey = { BURROW_SECRET_KEY: 'a'.repeat(64) };
    const byName = await burrowCli(['auth', 'export', 'kept'], dataDir, otherKey);
    expect(byName.code).toBe(1);
    expect(byName.stderr).toContain('cannot be opened without their secret key');
    const byId = await burrowCli(['auth', 'export', id], dataDir, otherKey);
    expect(byId.code).toBe(1);
    expect(byId.stderr).toContain('sealed with another secret key');

    const deleted = await burrow(['delete', 'kept', '--data-dir', dataDir, '--json']);
    expect(deleted.code).toBe(0);
    expect(JSON.parse(deleted.stdout)).toEqual({ status: 'success', auth_state_id: id });
    expect(existsSync(join(dataDir, 'auth-states', `${id}.json`))).toBe(false);
    const list = await burrow(['list', '--data-dir', dataDir, '--json']);
    expect(JSON.parse(list.stdout)).toEqual([]);
    const again = await burrow(['delete', id, '--data-dir', dataDir]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no saved auth state has the id or name "${id}"`);

    await using server = await testServer({ dataDir });
    expect(await (await server.api('/v1/auth_states')).json()).toEqual([]);
  }, 180_000); // a dozen CLI runs, each a Node process compiling the sources

  it('rotate-key: the next server reads the old states and re-encrypts them', async () => {
    const dataDir = join(dir, 'rot');
    let id: string;
    {
      await using server = await testServer({ dataDir });
      const res = await server.api('/v1/auth_states/import?name=kept', { json: state('three') });
      id = ((await res.json()) as { auth_state_id: string }).auth_state_id;
    }
    const before = readFileSync(join(dataDir, 'secret-key'), 'utf8');
    const rotated = await burrow(['rotate-key', '--data-dir', dataDir]);
    expect(rotated.code).toBe(0);
    expect(rotated.stdout).toMatch(/^new secret key [0-9a-f]{16} in .* \(was [0-9a-f]{16}\)/);
    expect(readFileSync(join(dataDir, 'secret-key'), 'utf8')).not.toBe(before);
    expect(existsSync(join(dataDir, 'secret-key.old'))).toBe(true);

    await using server = await testServer({ dataDir });
    const exported = await server.api(`/v1/auth_states/${id}/storage_state`);
    expect(await exported.json()).toEqual(state('three'));
    expect(existsSync(join(dataDir, 'secret-key.old'))).toBe(false);
  });
});
