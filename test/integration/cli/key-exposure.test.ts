/**
 * The API key of `burrow serve` is readable by no other process: `--api-key` warns and is hidden
 * from the server's command line (`/proc/N/cmdline` is world-readable), and no process the server
 * starts — instance processes, Chromium, Xvfb, helpers — has the key in its argv or environment,
 * whether it came from the flag or from `BURROW_API_KEY`. The server runs as a real process; every
 * process on the machine is searched for the key (a random one, so nothing else can match).
 * `burrow mcp`, which an agent host keeps running for its session, hides `--api-key` the same way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/server.js';

const root = resolve(import.meta.dirname, '../../..');
const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    c.kill('SIGTERM');
    await new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)));
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function serve(args: string[], env: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-key-'));
  dirs.push(dataDir);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', '--data-dir', dataDir, ...args],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BURROW_API_KEY: '', BURROW_API_KEY_FILE: '', ...env },
    },
  );
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await eventually(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out), 'listening', 30_000);
  const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
  return { child, url, stderr: () => err };
}

const read = (path: string) => {
  try {
    return readFileSync(path);
  } catch {
    return Buffer.alloc(0);
  }
};

/** Pids of every process but `except` whose command line or environment holds `needle`. */
function processesHolding(needle: string, except: number[]): { pid: number; where: string }[] {
  const hits: { pid: number; where: string }[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || except.includes(pid)) continue;
    for (const file of ['cmdline', 'environ']) {
      if (read(`/proc/${pid}/${file}`).includes(needle)) {
        hits.push({ pid, where: `${file}: ${read(`/proc/${pid}/cmdline`).toString()}` });
      }
    }
  }
  return hits;
}

async function startAndUse(url: string, key: string, type: 'ubuntu' | 'browser') {
  const call = (path: string, body: unknown) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const res = await call('/v1/start', { instance_type: type });
  expect(res.status, await res.clone().text()).toBe(200);
  const { id } = (await res.json()) as { id: string };
  if (type === 'ubuntu') {
    const bash = await call(`/v1/instance/${id}/bash`, { command: 'env; sleep 0.2' });
    expect(bash.status).toBe(200);
    expect(await bash.text()).not.toContain(key);
  }
  return id;
}

describe('the API key of burrow serve', () => {
  it('--api-key warns and leaves the command line; no child process has the key', async () => {
    const key = `flag-${randomBytes(12).toString('hex')}`;
    const s = await serve(['--api-key', key], {});
    expect(s.stderr()).toMatch(/warning: --api-key puts the key on the command line/);
    expect(s.stderr()).toContain('--api-key-file');
    await eventually(
      () => !read(`/proc/${s.child.pid}/cmdline`).includes(key),
      'the key to leave the server command line',
    );
    expect(read(`/proc/${s.child.pid}/cmdline`).toString()).toContain('--api-key ***');
    await startAndUse(s.url, key, 'ubuntu');
    await startAndUse(s.url, key, 'browser');
    expect(processesHolding(key, [process.pid])).toEqual([]);
  }, 180_000);

  it('BURROW_API_KEY reaches no process the server starts', async () => {
    const key = `env-${randomBytes(12).toString('hex')}`;
    const s = await serve([], { BURROW_API_KEY: key });
    expect(s.stderr()).not.toMatch(/warning: --api-key/);
    await startAndUse(s.url, key, 'ubuntu');
    await startAndUse(s.url, key, 'browser');
    // the server's own /proc/N/environ is the block it was started with (readable by root and
    // its own user only); nothing it started may hold the key
    expect(processesHolding(key, [process.pid, s.child.pid!])).toEqual([]);
  }, 180_000);
});

describe('the API key of burrow mcp', () => {
  it('--api-key warns and leaves the command line of the running MCP server', async () => {
    const key = `mcp-${randomBytes(12).toString('hex')}`;
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/main.ts',
        'mcp',
        '--base-url',
        'http://127.0.0.1:1',
        '--api-key',
        key,
      ],
      { cwd: root, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, BURROW_API_KEY: '' } },
    );
    children.push(child);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    await eventually(() => /warning: --api-key puts the key/.test(err), 'the warning', 30_000);
    await eventually(
      () => !read(`/proc/${child.pid}/cmdline`).includes(key),
      'the key to leave the command line',
    );
    expect(read(`/proc/${child.pid}/cmdline`).toString()).toContain('--api-key ***');
    expect(err).toContain('--api-key-file');
  }, 60_000);
});
