/**
 * Guarantees required, not assumed (issue 35): a server that serves others (`burrow serve`, the
 * real CLI, spawned) starts no instance without cgroup limits unless its operator said
 * `--allow-unlimited`; the embedded default (`startServer` from code) starts them and says once
 * on stderr which guarantees are missing, and says nothing where none is.
 *
 * On this machine a normal user has no limits (cgroup v1 is root's, and no v2 subtree is
 * delegated), so the server runs as one: `burrow-ci`, made here idempotently as
 * unprivileged.test.ts makes it, seeing this checkout through a bind mount at a path it can
 * traverse. As root every guarantee holds here (doctor says so in unprivileged.test.ts's
 * neighbour cases), which is the "nothing missing" case.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { root } from '../../e2e/run.js';
import { ensureUser } from '../../helpers/normal-user.js';
import { eventually } from '../../helpers/server.js';

const USER = 'burrow-ci';
const KEY = 'limits-test-key-0123456789';
const NOTICE = /instances start without these isolation guarantees/g;
let home: string;
let view: string;
/** Each spawned process group, and its end. */
const children: { child: ChildProcess; exited: Promise<number | null> }[] = [];

beforeAll(() => {
  ensureUser(USER);
  const uid = Number(execFileSync('id', ['-u', USER]).toString().trim());
  view = mkdtempSync(join(tmpdir(), 'burrow-ci-src-'));
  chmodSync(view, 0o755);
  home = mkdtempSync(join(tmpdir(), 'burrow-ci-'));
  chmodSync(home, 0o700);
  chownSync(home, uid, uid);
});

/** SIGTERM to each group (a server stops its instances, then exits), SIGKILL after 60 s. */
afterEach(async () => {
  for (const { child, exited } of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    process.kill(-child.pid!, 'SIGTERM');
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 60_000);
    await exited;
    clearTimeout(timer);
  }
});

afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
  if (view) rmSync(view, { recursive: true, force: true });
});

/** `node --import tsx <args>` as the normal user (or as root), output collected as it comes. */
function spawnAs(asUser: boolean, args: string[], env: Record<string, string> = {}) {
  const node = [process.execPath, '--import', 'tsx', ...args];
  const vars = [
    `HOME=${home}`,
    `BURROW_DATA_DIR=${join(home, asUser ? 'data' : 'root-data')}`,
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
  ];
  const argv = asUser
    ? [
        'unshare',
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
        '-c',
        'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec "$@"',
        'sh',
        root,
        view,
        'runuser',
        '-u',
        USER,
        '--',
        'env',
        ...vars,
        ...node,
      ]
    : ['env', ...vars, ...node];
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: root,
    env: { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // a group of its own: the server under runuser gets the afterEach's signal
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (out.stdout += String(d)));
  child.stderr.on('data', (d: Buffer) => (out.stderr += String(d)));
  const exited = new Promise<number | null>((done) => child.on('close', done));
  children.push({ child, exited });
  return { out, exited };
}

/** `burrow serve` as the normal user; its URL once it listens. */
async function serve(flags: string[], env: Record<string, string> = {}) {
  const run = spawnAs(
    true,
    ['src/cli/main.ts', 'serve', '--port', '0', '--data-dir', join(home, 'data'), ...flags],
    { BURROW_API_KEY: KEY, ...env },
  );
  const text = () => run.out.stdout + run.out.stderr;
  await eventually(
    () => /listening on http:\/\/127\.0\.0\.1:\d+/.test(text()),
    'listening',
    60_000,
  );
  const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(text())![1]!;
  return { url, text };
}

const api = (url: string, path: string, json?: unknown) =>
  fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    ...(json !== undefined && { body: JSON.stringify(json) }),
  });

describe(
  'burrow serve as a normal user, where instances cannot get limits',
  { timeout: 180_000 },
  () => {
    it('refuses a start with 503 naming the limits guarantee and its fixes, and said so at start', async () => {
      const server = await serve([]);
      // the operator is told at start, before any client asks (the start log is written as the
      // sandbox layer is made, before the server listens)
      const refused = /This server starts no instance without limits/;
      expect(server.text()).toMatch(refused);
      const res = await api(server.url, '/v1/start', { instance_type: 'browser' });
      const body = (await res.json()) as Record<string, unknown>;
      expect(res.status, JSON.stringify(body)).toBe(503);
      expect(Object.keys(body)).toEqual(['detail']);
      const detail = String(body.detail);
      expect(detail).toMatch(/'limits' isolation guarantee/);
      expect(detail).toMatch(/--allow-unlimited/);
      expect(detail).toMatch(/BURROW_ALLOW_UNLIMITED=1/);
      expect(detail).toMatch(/delegated/);
      // not transient: nothing to retry after
      expect(res.headers.get('retry-after')).toBeNull();
      expect(detail).not.toContain(home);
      // once: the refused request's own log line aside (it has the request's id)
      const said = server
        .text()
        .split('\n')
        .filter((l) => refused.test(l) && !l.includes('"reqId"'));
      expect(said, server.text()).toHaveLength(1);
    });

    it('with --allow-unlimited starts it (without limits), and says once what is missing', async () => {
      const server = await serve(['--allow-unlimited']);
      const res = await api(server.url, '/v1/start', { instance_type: 'browser' });
      const body = (await res.json()) as { id?: string; limits?: Record<string, unknown> };
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(body.limits).toMatchObject({ memory_bytes: null, pids: null, cpus: null });
      await api(server.url, `/v1/instance/${body.id}/stop`);
      expect(server.text()).not.toMatch(/This server starts no instance without limits/);
      const notices = server.text().match(NOTICE) ?? [];
      expect(notices, server.text()).toHaveLength(1);
      expect(server.text()).toMatch(/guarantees: [^\n]*limits \(/);
    });
  },
);

describe('the embedded default (startServer from code)', { timeout: 240_000 }, () => {
  it('as a normal user: starts instances without limits, and says so once for two servers and their instances', async () => {
    const run = spawnAs(true, ['test/helpers/embedded-twice.ts'], { STARTS: '1' });
    const code = await run.exited;
    expect(code, run.out.stderr).toBe(0);
    const { statuses } = JSON.parse(run.out.stdout.trim().split('\n').pop() ?? '{}') as {
      statuses: number[];
    };
    expect(statuses).toEqual([200, 200]);
    const notices = run.out.stderr.match(NOTICE) ?? [];
    expect(notices, run.out.stderr).toHaveLength(1);
    // it names what is missing: no limits at this level, and why
    expect(run.out.stderr).toMatch(/guarantees: [^\n]*limits \([^)]/);
  });

  it('as root, where every guarantee holds: says nothing', async () => {
    const run = spawnAs(false, ['test/helpers/embedded-twice.ts'], { STARTS: '0' });
    const code = await run.exited;
    expect(code, run.out.stderr).toBe(0);
    expect(run.out.stderr).not.toMatch(NOTICE);
  });
});
