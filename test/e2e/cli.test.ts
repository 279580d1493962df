/**
 * The `burrow` command: `start | list | get | stop | auth list | profiles | reap` against a server this
 * test runs, and `demo` — the README's main job — exactly as a user runs it, from dist/.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Instance } from 'burrow-sandbox';
import {
  eventually,
  instancePids,
  instanceProcesses,
  pidsMatching,
  pngSize,
  testServer,
  type TestServer,
} from '../helpers/server.js';
import { burrowCli, nodeEmbedded, root } from './run.js';

const dir = mkdtempSync(join(tmpdir(), 'bcl-'));
let server: TestServer;
beforeAll(async () => {
  server = await testServer({ dataDir: join(dir, 'srv') });
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** `burrow <args>` from the sources, pointed at the test server by flags, not env. */
const burrow = (args: string[], env: Record<string, string | undefined> = {}) =>
  burrowCli(args, join(dir, 'data'), env);
const flags = () => ['--base-url', server.url, '--api-key', server.apiKey];

describe('burrow start | list | get | stop | auth list', () => {
  it('drives an instance through its life and prints JSON or a table', async () => {
    const started = await burrow(['start', '--resolution', '800x600', '--json', ...flags()]);
    expect(started.stderr).toBe('');
    const [instance] = JSON.parse(started.stdout) as Instance[];
    expect(instance).toMatchObject({
      instance_type: 'browser',
      status: 'running',
      resolution: [800, 600],
    });
    const id = instance!.id;

    const list = await burrow(['list', '--live', ...flags()]);
    expect(list.stdout).toMatch(/^ID\s+TYPE\s+STATUS\s+LAUNCHED\s+RESOLUTION\n/);
    expect(list.stdout).toMatch(new RegExp(`${id}\\s+browser\\s+running\\s+\\S+Z\\s+800x600`));

    // env works as well as flags
    const got = await burrow(['get', id, '--json'], {
      BURROW_BASE_URL: server.url,
      BURROW_API_KEY: server.apiKey,
    });
    // get adds the running instance's cdp_url and live-view URL
    expect(JSON.parse(got.stdout)).toEqual([
      {
        ...instance,
        cdp_url: expect.stringContaining(`/cdp/${id}/`),
        stream_url: expect.any(String),
        // the time left counts down between the two answers
        time_left_seconds: expect.any(Number),
      },
    ]);
    const [gotten] = JSON.parse(got.stdout) as Instance[];
    const left = (i: Instance | undefined) =>
      (i as { time_left_seconds: number }).time_left_seconds;
    expect(left(instance) - left(gotten)).toBeGreaterThanOrEqual(0);
    expect(left(instance) - left(gotten)).toBeLessThan(60);

    const saved = await server.api(`/v1/instance/${id}/browser/save_auth?name=cli-state`, {
      method: 'POST',
    });
    const { auth_state_id } = (await saved.json()) as { auth_state_id: string };
    const auth = await burrow(['auth', 'list', ...flags()]);
    expect(auth.stdout).toMatch(new RegExp(`^ID\\s+NAME\\n${auth_state_id}\\s+cli-state$`, 'm'));

    const stopped = await burrow(['stop', id, ...flags()]);
    expect(stopped.stdout).toBe(`${id}  terminated\n`);
    await eventually(() => instancePids(id).length === 0, 'the instance processes to exit');
    const after = await burrow(['list', '--live', ...flags()]);
    expect(after.stdout).toBe('(none)\n');
  });

  it('lists and deletes persistent profiles', async () => {
    const res = await server.api('/v1/start', {
      json: { instance_type: 'browser', profile: { name: 'cli-profile', save_changes: true } },
    });
    const { id } = (await res.json()) as { id: string };
    await burrow(['stop', id, ...flags()]);
    await eventually(
      async () => (await burrow(['profiles', 'list', ...flags()])).stdout.includes('cli-profile'),
      'the profile to be saved',
      60_000,
    );
    const listed = await burrow(['profiles', 'list', ...flags()]);
    expect(listed.stdout).toMatch(
      /^NAME\s+SIZE\s+UPDATED\s+IN USE BY\ncli-profile\s+\d+\s+\S+\s+-$/m,
    );
    const deleted = await burrow(['profiles', 'delete', 'cli-profile', ...flags()]);
    expect(deleted.stdout).toBe('deleted profile cli-profile\n');
    const again = await burrow(['profiles', 'delete', 'cli-profile', ...flags()]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/status 404: Profile "cli-profile" not found/);
  }, 120_000);

  it('says clearly what is wrong', async () => {
    const noKey = await burrow(['list', '--base-url', server.url]);
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toBe('burrow: no API key: pass --api-key-file or set BURROW_API_KEY\n');

    const wrongKey = await burrow(['list', '--base-url', server.url, '--api-key', 'wrong-key-123']);
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toMatch(/status 401: Missing or invalid API key/);
    expect(wrongKey.stderr).not.toContain('wrong-key-123');

    const down = await burrow([
      'list',
      '--base-url',
      'http://127.0.0.1:9',
      '--api-key',
      'k'.repeat(10),
    ]);
    expect(down.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9 \(is a server running\?/);

    const unknown = await burrow(['get', 'inst_nope', ...flags()]);
    expect(unknown.stderr).toMatch(/status 404: Instance inst_nope not found/);

    const usage = await burrow(['stop', ...flags()]);
    expect(usage.stderr).toMatch(/usage: burrow stop ID\.\.\./);
  });

  it('reap with nothing to reap', async () => {
    const run = await burrow(['reap', ...flags()]);
    expect(run.stdout).toBe('no orphaned instances\n');
    expect(run.code).toBe(0);
  });

  it('--help lists the commands', async () => {
    const run = await burrow(['--help']);
    for (const name of ['serve', 'demo', 'start', 'list', 'get', 'stop', 'auth', 'reap']) {
      expect(run.stdout).toMatch(new RegExp(`^  ${name}\\s`, 'm'));
    }
  });
});

describe('burrow demo', () => {
  it('signs in, saves the state, and a second session is signed in with it (from dist/)', async () => {
    const main = join(root, 'dist/src/cli/main.js');
    if (!existsSync(main)) throw new Error('dist/ is missing: run `npm run build` first');
    const shot = join(dir, 'shot.png');
    const run = await nodeEmbedded([main, 'demo', '--screenshot', shot], join(dir, 'demo'));
    expect(run.code).toBe(0);
    const steps = run.stdout.split('\n').filter((l) => /^\s+\d+\/10 /.test(l));
    expect(steps).toHaveLength(10);
    for (const line of steps) expect(line).toMatch(/ ok +\d+ ms/);
    expect(run.stdout).toMatch(
      /check that session 2 is signed in \.+ ok +\d+ ms +signed-in, token-present/,
    );
    expect(run.stdout).toMatch(/done in [\d.]+ s: a fresh browser on a new instance was signed in/);
    expect(pngSize(readFileSync(shot))).toEqual([1024, 768]);
    expect(pidsMatching(join(dir, 'demo'))).toEqual([]);
    // the sandboxed Chromium names neither the data dir nor its instance: nothing is left in the
    // cgroups of the demo's embedded server, nor in those of the two instances it printed
    expect(run.serverPids).toHaveLength(1);
    expect(instanceProcesses(undefined, run.serverPids[0])).toEqual([]);
    const ids = [...new Set(run.stdout.match(/inst_[0-9a-f]{16}/g))];
    expect(ids).toHaveLength(2);
    for (const id of ids) expect(instancePids(id), id).toEqual([]);
  });
});
