/**
 * What the server keeps for a project is capped (issue 35: one project grew the database every
 * project shares from 7 to 84 MB in 15 s). On a single server its one project is the server:
 * through the HTTP API, past each cap (auth states by count and by bytes, uploaded extensions by
 * count and by bytes, saved profiles by count) the request answers 507 `store_full` saying which
 * cap, nothing of it is written, and deleting one makes room again.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APIError, Burrow } from '../../../src/client/index.js';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';
import { makeZip, testExtension } from '../../helpers/zip.js';

let server: TestServer;
let client: Burrow;

beforeAll(async () => {
  server = await testServer({
    maxAuthStatesPerProject: 3,
    maxAuthStateBytesPerProject: 64 * 1024,
    maxExtensions: 2,
    maxExtensionBytesTotal: 1024 * 1024,
    maxProfilesPerProject: 1,
  });
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await client?.close();
  await server?.close();
  expect(instanceProcesses()).toEqual([]);
});

/** A storage state of about `bytes` bytes. */
const state = (bytes = 10) => ({
  cookies: [],
  origins: [
    { origin: 'http://127.0.0.1:9', localStorage: [{ name: 't', value: 'x'.repeat(bytes) }] },
  ],
});

const importState = (name: string, bytes?: number) =>
  server.api(`/v1/auth_states/import?name=${name}`, { json: state(bytes) });

/** Status, error code and detail of a refusal. */
async function refusal(res: Response) {
  return {
    status: res.status,
    code: res.headers.get('x-burrow-error'),
    detail: ((await res.json()) as { detail: string }).detail,
  };
}

const names = async () =>
  ((await (await server.api('/v1/auth_states')).json()) as { name: string }[]).map((s) => s.name);

describe('caps on what is kept', () => {
  it('auth states: by count, then by bytes; nothing half-written; a delete makes room', async () => {
    const ids: string[] = [];
    for (const n of ['a', 'b', 'c']) {
      const res = await importState(n);
      expect(res.status).toBe(200);
      ids.push(((await res.json()) as { auth_state_id: string }).auth_state_id);
    }
    expect(await refusal(await importState('d'))).toEqual({
      status: 507,
      code: 'store_full',
      detail:
        'No room for an auth state: 3 auth states are kept, the cap is 3; delete some to make room',
    });
    // replacing one by name adds none
    expect((await importState('c', 100)).status).toBe(200);
    expect((await names()).sort()).toEqual(['a', 'b', 'c']);
    expect(
      readdirSync(join(server.dataDir, 'auth-states')).filter((f) => f.endsWith('.json')),
    ).toHaveLength(3);

    expect((await server.api(`/v1/auth_states/${ids[0]}/delete`, { method: 'POST' })).status).toBe(
      200,
    );
    // room for one by count, but not for 100 KB by bytes
    const big = await refusal(await importState('d', 100_000));
    expect(big.status).toBe(507);
    expect(big.detail).toMatch(
      /^No room for an auth state: with it the auth states would take \d+ bytes, the cap is 65536; delete some to make room$/,
    );
    expect((await names()).sort()).toEqual(['b', 'c']);
    expect((await importState('d')).status).toBe(200);
  });

  it('extensions: by count and by bytes; a delete makes room', async () => {
    const one = await client.extensions.upload(makeZip(testExtension('one')));
    await client.extensions.upload(makeZip(testExtension('two')));
    const third = await client.extensions
      .upload(makeZip(testExtension('three')))
      .catch((e: unknown) => e);
    expect(third).toBeInstanceOf(APIError);
    expect((third as APIError).status).toBe(507);
    expect((third as Error).message).toContain(
      'No room for an extension: 2 extensions are kept, the cap (maxExtensions) is 2',
    );
    expect(await client.extensions.list()).toHaveLength(2);
    await client.extensions.delete(one.id);
    // room by count; a 2 MB one passes the 1 MiB of every extension together
    const huge = await client.extensions
      .upload(
        makeZip([
          ...testExtension('huge'),
          { name: 'blob.bin', data: Buffer.alloc(2 * 2 ** 20, 7) },
        ]),
      )
      .catch((e: unknown) => e);
    expect((huge as APIError).status).toBe(507);
    expect((huge as Error).message).toMatch(
      /with it the extensions would take \d+ bytes, the cap \(maxExtensionBytesTotal\) is 1048576/,
    );
    expect(await client.extensions.list()).toHaveLength(1);
    await client.extensions.upload(makeZip(testExtension('three')));
  });

  it('profiles: a start that would keep one more past the count is refused; a delete makes room', async () => {
    const start = (name: string) =>
      server.api('/v1/start', {
        json: { instance_type: 'browser', profile: { name, save_changes: true } },
      });
    const first = await start('one');
    expect(first.status).toBe(200);
    await client.instances.stop(((await first.json()) as { id: string }).id);
    await expect
      .poll(async () => (await client.profiles.list()).find((p) => p.name === 'one')?.in_use_by, {
        timeout: 60_000,
      })
      .toBeNull();
    expect(await refusal(await start('two'))).toEqual({
      status: 507,
      code: 'store_full',
      detail:
        'No room for profile "two": 1 profiles are kept, the cap (maxProfilesPerProject) is 1; delete some to make room',
    });
    // the one kept is still started with (and saved)
    const again = await start('one');
    expect(again.status).toBe(200);
    await client.instances.stop(((await again.json()) as { id: string }).id);
    await expect
      .poll(async () => (await client.profiles.list())[0]?.in_use_by, { timeout: 60_000 })
      .toBeNull();
    expect(await client.profiles.delete('one')).toEqual({ status: 'success' });
    const two = await start('two');
    expect(two.status).toBe(200);
    await client.instances.stop(((await two.json()) as { id: string }).id);
  }, 180_000);

  it('profiles: a save past the project’s bytes is refused at the stop, nothing written', async () => {
    await using small = await testServer({ maxProfileBytesPerProject: 1000 });
    const api = new Burrow({ baseUrl: small.url, apiKey: small.apiKey, maxRetries: 0 });
    try {
      const inst = await api.instances.start({
        instance_type: 'browser',
        profile: { name: 'fat', save_changes: true },
      });
      await api.instances.stop(inst.id);
      await expect
        .poll(
          async () =>
            ((await api.instances.get(inst.id)).events ?? []).find(
              (e) => e.type === 'profile_not_saved',
            )?.message ?? '',
          { timeout: 60_000, interval: 500 },
        )
        .toMatch(
          /^profile fat not saved, its previous version is kept: No room for profile "fat": with it the profiles would take \d+ bytes, the cap \(maxProfileBytesPerProject\) is 1000/,
        );
      expect(await api.profiles.list()).toEqual([]);
      expect(readdirSync(join(small.dataDir, 'profiles'))).toEqual([]);
    } finally {
      await api.close();
    }
  }, 180_000);
});
