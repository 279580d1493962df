/**
 * Saving a persistent profile against links a process of the instance planted in it (a page that
 * got code execution in Chromium writes in its own profile directory; the test plants them on the
 * instance's disk, owned by the instance's user, as such a process would): a link to a root-only
 * file of the host and a link to a host directory. The server saves the profile as root, after
 * Chromium exited; it must skip links, never follow them, so nothing of the host enters the saved
 * profile, and the next instance started with it, the attacker's again, finds no host file.
 */
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import { instanceDisk, testServer, type TestServer } from '../../helpers/server.js';

const PROFILE = '.config/burrow-chromium/profile';
const SECRET = `host-secret-${randomBytes(8).toString('hex')}`;

let server: TestServer;
let client: Burrow;
let hostDir: string;

beforeAll(async () => {
  hostDir = mkdtempSync(join(tmpdir(), 'burrow-secret-'));
  writeFileSync(join(hostDir, 'shadow'), SECRET, { mode: 0o600 });
  mkdirSync(join(hostDir, 'dir'), { mode: 0o700 });
  writeFileSync(join(hostDir, 'dir', 'inner'), SECRET, { mode: 0o600 });
  server = await testServer({ maxInstances: 2 });
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  if (hostDir) rmSync(hostDir, { recursive: true, force: true });
});

async function start(profile: { name: string; save_changes?: boolean }): Promise<string> {
  const res = await server.api('/v1/start', { json: { instance_type: 'browser', profile } });
  const body = (await res.json()) as { id: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.id;
}

/** The profile's row once no instance holds it (a stop saves and releases it in the background). */
async function released(name: string) {
  await expect
    .poll(async () => (await client.profiles.list()).find((p) => p.name === name)?.in_use_by, {
      timeout: 60_000,
    })
    .toBeNull();
}

/** Every file name under `dir`, recursively, relative to it (links included, not followed). */
function listing(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    return e.isDirectory() ? [rel, ...listing(join(dir, e.name), rel)] : [rel];
  });
}

describe('a saved profile with links planted in it', () => {
  it('saves the profile without a byte of the host files the links name', async () => {
    const a = await start({ name: 'planted', save_changes: true });
    const profile = join(instanceDisk(a).home, PROFILE);
    const { uid, gid } = statSync(profile);
    const plant = (target: string, name: string) => {
      symlinkSync(target, join(profile, name));
      lchownSync(join(profile, name), uid, gid);
    };
    plant(join(hostDir, 'shadow'), 'leak');
    plant(join(hostDir, 'dir'), 'leakdir');
    // and a file of its own, which the save must carry: the save did happen
    writeFileSync(join(profile, 'mine'), 'kept');
    lchownSync(join(profile, 'mine'), uid, gid);

    await client.instances.stop(a);
    await released('planted');

    const b = await start({ name: 'planted' });
    try {
      const seeded = join(instanceDisk(b).home, PROFILE);
      const names = listing(seeded);
      expect(names).toContain('mine');
      expect(names).not.toContain('leak');
      expect(names).not.toContain('leakdir');
      expect(names.filter((n) => n.endsWith('inner'))).toEqual([]);
      expect(existsSync(join(seeded, 'leak'))).toBe(false);
      // nor under any other name: no file of the saved profile holds the host's secret
      const holding = names.filter((n) => {
        const at = join(seeded, n);
        return lstatSync(at).isFile() && readFileSync(at).includes(SECRET);
      });
      expect(holding).toEqual([]);
    } finally {
      await client.instances.stop(b);
      await released('planted');
    }
  }, 180_000);
});
