/**
 * Never leak an instance: real child processes open sessions against a server this test runs,
 * then die in the ways processes die. Whatever happens, the instance ends up stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openSession, reapOrphans, type Instance } from 'burrow-sandbox';
import { alive } from '../../src/internal/process.js';
import { eventually, instanceChromium, instancePids, type TestServer } from '../helpers/server.js';
import { sessionServer } from './fixtures/session-server.js';
import { node, root } from './run.js';

const env = sessionServer('bsl-');
const { dataDir } = env;
let server: TestServer;
beforeAll(() => {
  server = env.server;
});

interface Child {
  proc: ChildProcess;
  instanceId: string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs test/e2e/fixtures/session-child.ts in `mode` and waits for its session to be open. */
async function child(mode: string, env: Record<string, string> = {}): Promise<Child> {
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/e2e/fixtures/session-child.ts', mode],
    {
      cwd: root,
      env: {
        ...process.env,
        BURROW_BASE_URL: server.url,
        BURROW_API_KEY: server.apiKey,
        BURROW_DATA_DIR: dataDir,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += String(d)));
  const exit = once(proc, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  const instanceId = await new Promise<string>((ready, fail) => {
    proc.stdout!.on('data', (d: Buffer) => {
      stdout += String(d);
      const m = /ready (\S+)/.exec(stdout);
      if (m) ready(m[1]!);
    });
    void exit.then(({ code, signal }) =>
      fail(new Error(`child exited (${code ?? signal}) before its session opened:\n${stderr}`)),
    );
  });
  return { proc, instanceId, stderr: () => stderr, exit };
}

const status = async (id: string) =>
  ((await (await server.api(`/v1/instance/${id}`)).json()) as Instance).status;
const ledger = () => readdirSync(join(dataDir, 'sessions')).filter((f) => f.endsWith('.json'));

describe('a process that dies', () => {
  it('SIGKILL leaves the instance running; the next openSession reaps it', async () => {
    const c = await child('hold');
    c.proc.kill('SIGKILL');
    expect(await c.exit).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await status(c.instanceId)).toBe('running'); // nothing could run in the child
    expect(ledger()).toHaveLength(1);

    await using session = await openSession({ baseUrl: server.url, apiKey: server.apiKey });
    expect(await status(c.instanceId)).toBe('terminated');
    await eventually(() => instancePids(c.instanceId).length === 0, 'the orphan to be gone');
    expect(ledger()).toHaveLength(1); // only the live session's own entry
    expect(session.instance.id).not.toBe(c.instanceId);
  });

  it('SIGKILL, then `burrow reap` stops it', async () => {
    const c = await child('hold');
    c.proc.kill('SIGKILL');
    await c.exit;
    expect(await status(c.instanceId)).toBe('running');

    const reap = await node(
      ['--import', 'tsx', 'src/cli/main.ts', 'reap', '--base-url', server.url],
      {
        BURROW_API_KEY: server.apiKey,
        BURROW_DATA_DIR: dataDir,
      },
    );
    expect(reap.code).toBe(0);
    expect(reap.stdout).toMatch(
      new RegExp(`^${c.instanceId}\\s+${server.url}\\s+\\d+\\s+stopped$`, 'm'),
    );
    expect(await status(c.instanceId)).toBe('terminated');
    expect(ledger()).toEqual([]);
  });

  it.each(['SIGINT', 'SIGTERM'] as const)(
    '%s: the instance is stopped before the process exits, by that signal',
    async (signal) => {
      const c = await child('hold');
      c.proc.kill(signal);
      expect(await c.exit).toEqual({ code: null, signal });
      expect(await status(c.instanceId)).toBe('terminated');
      await eventually(() => instancePids(c.instanceId).length === 0, 'the orphan to be gone');
      expect(ledger()).toEqual([]);
    },
  );

  it('an error thrown inside `await using` stops the instance; exit code 1 with the error', async () => {
    const c = await child('throw');
    expect(await c.exit).toEqual({ code: 1, signal: null });
    expect(c.stderr()).toContain('boom inside await using');
    expect(await status(c.instanceId)).toBe('terminated');
    expect(ledger()).toEqual([]);
  });

  it('an uncaught exception stops the instance, prints the error and exits 1', async () => {
    const c = await child('uncaught');
    expect(await c.exit).toEqual({ code: 1, signal: null });
    expect(c.stderr()).toContain('uncaught boom');
    expect(await status(c.instanceId)).toBe('terminated');
    expect(ledger()).toEqual([]);
  });

  it('beforeExit: a session left open when the event loop empties is stopped, exit code 0', async () => {
    const c = await child('forget');
    expect(await c.exit).toEqual({ code: 0, signal: null });
    expect(await status(c.instanceId)).toBe('terminated');
    expect(ledger()).toEqual([]);
  });

  it('SIGKILL of a process with an embedded server: its Chromium dies with it, reap forgets it', async () => {
    const c = await child('hold', { BURROW_BASE_URL: '' });
    // Chromium runs in the instance's sandbox: found through the instance's cgroup
    const chromium = instanceChromium(c.instanceId);
    expect(chromium).toBeDefined();
    c.proc.kill('SIGKILL');
    await c.exit;
    await eventually(
      () => !alive(chromium!) && instancePids(c.instanceId).length === 0,
      'Chromium and every other process of the instance to die',
    );
    expect(ledger()).toHaveLength(1);
    const report = await reapOrphans({ baseUrl: server.url, apiKey: server.apiKey });
    expect(report.removed.map((e) => e.instanceId)).toEqual([c.instanceId]);
    expect(ledger()).toEqual([]);
  });
});

describe('a missing peer dependency', () => {
  it.each([
    ['playwright', 'playwright-core'],
    ['puppeteer', 'puppeteer-core'],
  ])('driver %s without %s: an error that names the package to install', async (driver, pkg) => {
    const run = await node(
      [
        '--import',
        'tsx',
        '--import',
        './test/e2e/fixtures/hide-package.ts',
        'test/e2e/fixtures/missing-peer.ts',
        driver,
      ],
      {
        BURROW_BASE_URL: server.url,
        BURROW_API_KEY: server.apiKey,
        BURROW_DATA_DIR: dataDir,
        BURROW_TEST_HIDE: pkg,
      },
    );
    expect(JSON.parse(run.stdout)).toEqual({
      name: 'PeerDependencyError',
      code: 'peer_missing',
      packageName: pkg,
      message: expect.stringContaining(`npm install ${pkg}`),
    });
    expect(ledger()).toEqual([]); // the instance it had started was stopped
  });
});
