/**
 * The first run as a user meets it (issue 10 §2, §3): scripts/setup.sh (nothing missing; not
 * root with a package missing → the exact command), `burrow doctor`, `burrow --version`,
 * `burrow get` with cdp_url and live view, and `burrow list` / `burrow auth list` on the embedded
 * default's data dir with no server running. Real child processes throughout.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Instance } from 'burrow-sandbox';
import { AuthStore } from '../../src/server/auth-states/store.js';
import { eventually, testServer, type TestServer } from '../helpers/server.js';
import { burrowCli, root } from './run.js';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'bfr-'));
let server: TestServer;
beforeAll(async () => {
  server = await testServer({ dataDir: join(dir, 'srv') });
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** `burrow <args>` from the sources with no server configured unless `env` says. */
const burrow = (args: string[], env: Record<string, string | undefined> = {}) =>
  burrowCli(args, join(dir, 'data'), env);

/** scripts/setup.sh as `uid` (0 = as this test runs), with `env`. */
async function setup(args: string[], env: Record<string, string>, uid?: number) {
  const argv = ['sh', join(root, 'scripts/setup.sh'), ...args];
  const cmd =
    uid === undefined
      ? argv
      : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', ...argv];
  try {
    const { stdout, stderr } = await run(cmd[0]!, cmd.slice(1), {
      cwd: root,
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('scripts/setup.sh', () => {
  it('with nothing missing: says so and exits 0', async () => {
    const r = await setup(['--system-only'], {});
    expect(r).toMatchObject({ code: 0 });
    expect(r.stdout).toContain('setup: every Debian package burrow uses is installed');
  });

  it('not root, a package missing: prints the exact apt-get line and exits 1, installs nothing', async () => {
    const r = await setup(
      ['--system-only'],
      { BURROW_SETUP_ASSUME_MISSING: 'ffmpeg x11vnc' },
      65534, // nobody
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('setup: missing Debian packages: ffmpeg x11vnc');
    expect(r.stdout).toMatch(/^ {2}sudo apt-get install -y ffmpeg x11vnc$/m);
    expect(r.stdout).not.toContain('installing');
  });

  it('as root, a package missing: apt-get update, then apt-get install -y of exactly it', async () => {
    // a stand-in apt-get that records its calls: this machine has no network for a real update
    const bin = join(dir, 'fake-apt');
    const log = join(dir, 'apt.log');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'apt-get'), `#!/bin/sh\necho "$*" >> ${log}\necho "apt progress"\n`, {
      mode: 0o755,
    });
    const r = await setup(['--system-only'], {
      BURROW_SETUP_ASSUME_MISSING: 'ffmpeg',
      PATH: `${bin}:${process.env.PATH}`,
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('setup: installing Debian packages: ffmpeg');
    expect(r.stdout).toContain('apt progress'); // apt's own output is shown
    expect(readFileSync(log, 'utf8')).toBe('update\ninstall -y ffmpeg\n');
  });

  it('lists every package the server needs (src/server/host/requirements.ts)', async () => {
    const { requirements } = await import('../../src/server/host/requirements.js');
    const script = readFileSync(join(root, 'scripts/setup.sh'), 'utf8');
    for (const r of requirements()) {
      for (const pkg of r.packages) expect(script).toMatch(new RegExp(`need ${pkg}\\b`));
    }
  });
});

describe('burrow doctor', () => {
  it('on this machine: everything present, both types ready, exit 0', async () => {
    const r = await burrow(['doctor']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}ok +Chromium /m);
    expect(r.stdout).toMatch(/^ {2}ok +egress: /m);
    expect(r.stdout).toMatch(/^ {2}ok +limits: /m);
    expect(r.stdout).toMatch(/^ {2}browser: ready$/m);
    expect(r.stdout).toMatch(/^ {2}ubuntu: ready$/m);
  });

  it('without Chromium: MISSING with where it looked and the fix, exit 1; --json says the same', async () => {
    const env = { BURROW_CHROMIUM: join(dir, 'no-chromium') };
    const r = await burrow(['doctor'], env);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /^ {2}MISSING +Chromium .*no-chromium.*fix: apt-get install -y chromium$/m,
    );
    expect(r.stdout).toMatch(/^ {2}browser: cannot start here \(missing Chromium\)$/m);
    expect(r.stdout).toContain('to install everything missing: apt-get install -y chromium');
    const j = await burrow(['doctor', '--json'], env);
    const report = JSON.parse(j.stdout) as {
      programs: { name: string; ok: boolean; fix?: string }[];
      instance_types: { browser: { ready: boolean }; ubuntu: { ready: boolean } };
      fix?: string;
    };
    expect(report.programs.find((p) => p.name === 'Chromium')).toMatchObject({
      ok: false,
      fix: 'apt-get install -y chromium',
    });
    expect(report.instance_types.browser.ready).toBe(false);
    expect(report.instance_types.ubuntu.ready).toBe(true);
  });
});

describe('the CLI', () => {
  it('burrow --version prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    const r = await burrow(['--version']);
    expect(r).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });

  it('burrow get shows the cdp_url and the live-view URL', async () => {
    const started = (await (
      await server.api('/v1/start', { json: { instance_type: 'browser' } })
    ).json()) as Instance;
    try {
      const flags = ['--base-url', server.url, '--api-key', server.apiKey];
      const r = await burrow(['get', started.id, ...flags]);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        new RegExp(`^cdp_url: +ws://127\\.0\\.0\\.1:\\d+/cdp/${started.id}/`, 'm'),
      );
      expect(r.stdout).toMatch(/^live view: +http:\/\/127\.0\.0\.1:\d+\/\S+token=/m);
      const [j] = JSON.parse((await burrow(['get', started.id, '--json', ...flags])).stdout) as {
        cdp_url?: string;
        stream_url?: string;
      }[];
      expect(j!.cdp_url).toContain(`/cdp/${started.id}/`);
      expect(j!.stream_url).toContain('token=');
    } finally {
      await server.api(`/v1/instance/${started.id}/stop`, { method: 'POST' });
    }
  });

  it('burrow list and burrow auth list read the embedded default’s data dir with no server', async () => {
    const data = join(dir, 'embedded');
    const saved = await new AuthStore(data).save('offline-demo', {
      cookies: [],
      localStorage: {},
      sessionStorage: {},
    });
    // a script holding a session on its embedded server in this data dir
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/e2e/scripts/exit-child.ts', 'wait'],
      {
        cwd: root,
        env: {
          ...process.env,
          BURROW_BASE_URL: '',
          BURROW_API_KEY: '',
          BURROW_DATA_DIR: data,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += String(d)));
    const exited = once(child, 'exit');
    try {
      await eventually(() => /ready (\S+)/.test(out), 'the script’s session', 90_000);
      const id = /ready (\S+)/.exec(out)![1]!;
      const list = await burrow(['list', '--json'], { BURROW_DATA_DIR: data });
      expect(list.code).toBe(0);
      expect(list.stderr).toContain(`reading the data dir ${data}`);
      const instances = JSON.parse(list.stdout) as (Instance & { server_pid: number })[];
      expect(instances).toContainEqual(
        expect.objectContaining({ id, instance_type: 'browser', status: 'running' }),
      );
      const table = await burrow(['list', '--live'], { BURROW_DATA_DIR: data });
      expect(table.stdout).toMatch(new RegExp(`^${id}\\s+browser\\s+running`, 'm'));

      const auth = await burrow(['auth', 'list'], { BURROW_DATA_DIR: data });
      expect(auth.code).toBe(0);
      expect(auth.stdout).toMatch(new RegExp(`^${saved.id}\\s+offline-demo$`, 'm'));
    } finally {
      child.kill('SIGINT');
      await exited;
    }
    // once the script is gone, its instance is listed as terminated
    const after = JSON.parse(
      (await burrow(['list', '--json'], { BURROW_DATA_DIR: data })).stdout,
    ) as Instance[];
    expect(after.every((i) => i.status === 'terminated')).toBe(true);
  });
});
