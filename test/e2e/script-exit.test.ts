/**
 * Scripts that behave (issues 10 §3 and 20), as real child processes: a script that forgets
 * `stop()` stays up after its work, as one that forgets `browser.close()` does locally, and says
 * so once on stderr naming its session (a script waiting for a page event must never end early:
 * event-waits.test.ts); one that closes its browser without `stop()` ends with its instance
 * stopped; Ctrl-C says what it stops instead of printing the driver's stack trace, and ends by
 * SIGINT with the instance stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Instance } from 'burrow-sandbox';
import { eventually, instanceProcesses, instancePids, type TestServer } from '../helpers/server.js';
import { sessionServer } from './fixtures/session-server.js';
import { embeddedEnv, nodeEmbedded, node, root } from './run.js';

const env = sessionServer('bsx-');
let server: TestServer;
beforeAll(() => {
  server = env.server;
});

const SCRIPT = ['--import', 'tsx', 'test/e2e/scripts/exit-child.ts'];
const status = async (id: string) =>
  ((await (await server.api(`/v1/instance/${id}`)).json()) as Instance).status;
const idOf = (stdout: string) => /ready (\S+)/.exec(stdout)?.[1];

/** `promise`, or a failure after `ms`: a script that hangs fails the test instead of the run. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new Error(`${what} did not end within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

interface Started {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<[number | null, NodeJS.Signals | null]>;
}

/** Starts `node <args>` in the repository with `env` over this process's environment. */
function start(args: string[], env: Record<string, string | undefined>): Started {
  const proc = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += String(d)));
  proc.stderr.on('data', (d: Buffer) => (stderr += String(d)));
  const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return { proc, stdout: () => stdout, stderr: () => stderr, exited };
}

const NOTICE =
  /^burrow: session (inst_\w+) is still open and nothing else keeps this process running.*await session\.stop\(\).*Ctrl-C stops the instance$/m;

/**
 * A script that forgot stop(): it stays up after its work (as a local one that forgot
 * `browser.close()`), says so once naming its session, and Ctrl-C then stops the instance.
 */
async function staysUpThenCtrlC(child: Started): Promise<string> {
  try {
    await within(
      120_000,
      eventually(() => NOTICE.test(child.stderr()), 'the forgotten-stop notice', 120_000),
      'the notice',
    );
    const id = idOf(child.stdout())!;
    expect(child.stdout()).toContain('evaluated 42'); // the call in flight was not cut short
    expect(NOTICE.exec(child.stderr())?.[1]).toBe(id);
    expect(child.stderr().match(new RegExp(NOTICE.source, 'gm'))).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 1000));
    expect(child.proc.exitCode).toBeNull(); // still running, and so is its instance
    expect(instancePids(id).length).toBeGreaterThan(0);
    child.proc.kill('SIGINT');
    const [code, signal] = await within(30_000, child.exited, 'the stop after SIGINT');
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGINT' });
    await eventually(() => instancePids(id).length === 0, 'the instance processes to be gone');
    return id;
  } finally {
    // a failed expectation must not leave the child running: it would, by design
    if (child.proc.exitCode === null && child.proc.signalCode === null) {
      child.proc.kill('SIGINT');
      await within(30_000, child.exited, 'the stop after SIGINT').catch(() => {
        child.proc.kill('SIGKILL');
      });
    }
  }
}

describe('a script that forgets stop()', () => {
  it('on a remote server: stays up like a local browser, says so once with the id; Ctrl-C stops it', async () => {
    const child = start([...SCRIPT, 'forget'], {
      BURROW_BASE_URL: server.url,
      BURROW_API_KEY: server.apiKey,
    });
    const id = await staysUpThenCtrlC(child);
    expect(await status(id)).toBe('terminated');
  }, 180_000);

  it('on the embedded server: the same, and no instance process outlives it', async () => {
    const child = start([...SCRIPT, 'forget'], embeddedEnv(env.dataDir));
    await staysUpThenCtrlC(child);
    await eventually(
      () => instanceProcesses(undefined, child.proc.pid).length === 0,
      'the embedded server’s instance processes to be gone',
    );
  }, 180_000);
});

describe('a script that closes its browser without stop()', () => {
  it('on the embedded server with an ubuntu instance (display, X and VNC connections): ends, exit 0, nothing left', async () => {
    const run = await within(
      120_000,
      nodeEmbedded([...SCRIPT, 'close'], env.dataDir, { EXIT_CHILD_TYPE: 'ubuntu' }),
      'the script',
    );
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain('evaluated 42');
    expect(run.stderr).not.toMatch(NOTICE);
    expect(run.serverPids.length).toBeGreaterThan(0);
    for (const pid of run.serverPids) {
      await eventually(
        () => instanceProcesses(undefined, pid).length === 0,
        'the embedded server’s instance processes to be gone',
      );
    }
  }, 180_000);
});

describe('Ctrl-C', () => {
  it('says it is stopping the session, prints no stack trace, ends by SIGINT', async () => {
    const proc = spawn(process.execPath, [...SCRIPT, 'wait'], {
      cwd: root,
      env: { ...process.env, BURROW_BASE_URL: server.url, BURROW_API_KEY: server.apiKey },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    proc.stderr.on('data', (d: Buffer) => (stderr += String(d)));
    const exited = once(proc, 'exit');
    await within(
      90_000,
      eventually(() => idOf(stdout) !== undefined, 'the session to open', 90_000),
      'opening',
    );
    proc.kill('SIGINT');
    const [code, signal] = await within(30_000, exited, 'the stop after SIGINT');
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGINT' });
    expect(stderr).toContain('burrow: SIGINT: stopping 1 session');
    expect(stderr).not.toMatch(/^\s+at /m); // no stack trace
    expect(stdout).not.toContain('the wait ended');
    expect(await status(idOf(stdout)!)).toBe('terminated');
  });
});

describe('before any instance is started', () => {
  it('a missing peer (playwright-core) fails naming the npm install; the server started nothing', async () => {
    const count = async () =>
      ((await (await server.api('/v1/instances')).json()) as Instance[]).length;
    const before = await count();
    const run = await node(
      ['--import', 'tsx', '--import', './test/e2e/fixtures/hide-package.ts', ...SCRIPT.slice(2)],
      {
        BURROW_BASE_URL: server.url,
        BURROW_API_KEY: server.apiKey,
        BURROW_TEST_HIDE: 'playwright-core',
      },
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('npm install playwright-core');
    expect(run.stdout).not.toContain('ready');
    expect(await count()).toBe(before);
  });
});

describe('debug output', () => {
  it('BURROW_LOG=debug: each API call with status and ms, the session steps, the live-view URL', async () => {
    const run = await node([...SCRIPT, 'close'], {
      BURROW_BASE_URL: server.url,
      BURROW_API_KEY: server.apiKey,
      BURROW_LOG: 'debug',
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^burrow:client POST \/v1\/start 200 \d+ms$/m);
    expect(run.stderr).toMatch(
      /^burrow:client GET \/v1\/instance\/inst_\w+\/browser\/cdp_url 200 \d+ms$/m,
    );
    expect(run.stderr).toMatch(/^burrow:session inst_\w+: connecting playwright \(\d+ms\)$/m);
    expect(run.stderr).toMatch(
      /^burrow:session inst_\w+: open in \d+ms; live view: http:\/\/\S+token=\S+$/m,
    );
    expect(run.stderr).not.toContain(server.apiKey);
  });
});
