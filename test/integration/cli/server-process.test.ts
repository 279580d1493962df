/**
 * The CLI server as a real process: it prints where it listens, stops every instance on
 * SIGTERM, and when it is SIGKILLed its Chromium processes die with it (PR_SET_PDEATHSIG).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, pidsMatching } from '../../helpers/server.js';

const root = resolve(import.meta.dirname, '../../..');
const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function serve(extra: string[] = []) {
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-proc-'));
  dirs.push(dataDir);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', '--data-dir', dataDir, ...extra],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, BURROW_API_KEY: '' } },
  );
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await eventually(
    () => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out),
    'listening line',
    20_000,
  );
  const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
  const key = /API key \(generated, shown once\): (\S+)/.exec(out)?.[1];
  return { child, url, key, dataDir, output: () => out };
}

async function startBrowser(url: string, key: string) {
  const res = await fetch(`${url}/v1/start`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ instance_type: 'browser' }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

describe('burrow serve', () => {
  it('generates and prints a key once, binds loopback, and SIGTERM stops every instance', async () => {
    const s = await serve();
    expect(s.key).toMatch(/^bk_/);
    expect(s.output().split(s.key!).length - 1).toBe(1);
    const id = await startBrowser(s.url, s.key!);
    expect(pidsMatching(id).length).toBeGreaterThan(0);
    s.child.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => s.child.once('exit', (c) => r(c)));
    expect(code).toBe(0);
    expect(pidsMatching(id)).toEqual([]);
    expect(pidsMatching(s.dataDir)).toEqual([]);
  });

  it('says at start which host loopback ports instances may reach, and how to open one', async () => {
    const closed = await serve(['--api-key', 'ports-test-key-123']);
    await eventually(() => /host ports:/.test(closed.output()), 'host ports line');
    expect(closed.output()).toContain(
      "host ports: instances may reach none of this machine's loopback ports; open one with --allow-host-port PORT",
    );
    closed.child.kill('SIGTERM');
    const opened = await serve([
      ...['--api-key', 'ports-test-key-123', '--allow-host-port', '8080'],
      ...['--allow-host-port', '3000'],
    ]);
    await eventually(() => /host ports:/.test(opened.output()), 'host ports line');
    expect(opened.output()).toContain(
      "host ports: instances may reach 3000, 8080 on this machine's loopback (--allow-host-port)",
    );
    opened.child.kill('SIGTERM');
    const all = await serve(['--api-key', 'ports-test-key-123', '--allow-host-loopback']);
    await eventually(() => /host ports:/.test(all.output()), 'host ports line');
    expect(all.output()).toContain('instances may reach every loopback port of this machine');
  });

  it('SIGKILL of the server leaves no Chromium behind', async () => {
    const s = await serve(['--api-key', 'kill-test-key-123']);
    const id = await startBrowser(s.url, 'kill-test-key-123');
    expect(pidsMatching(id).length).toBeGreaterThan(0);
    s.child.kill('SIGKILL');
    await eventually(() => pidsMatching(s.dataDir).length === 0, 'Chromium to die with the server');
  });

  it('rejects a bad port with a clear message', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', 'x'],
      {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.push(child);
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(1);
    expect(err).toContain('--port must be an integer');
  });
});
