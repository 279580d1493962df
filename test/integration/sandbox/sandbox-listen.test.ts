/**
 * `Sandbox.listen` (src/server/sandbox/sandbox.ts) on a real sandbox: the listener is opened by
 * the perl step on the root side of a chain, in the instance's network namespace and not the
 * host's; what an instance process sends to it reaches the server; the step is gone once the
 * socket is handed over; a port taken inside gives a clear error; no process of the instance can
 * be given a Node IPC channel. It also prints what a listen costs.
 */
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/server/instances/runtime.js';
import { Sandbox, SANDBOX_PATH, type SandboxHost } from '../../../src/server/sandbox/index.js';
import { testSandboxHost } from '../../helpers/sandbox.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };
/** A port nothing on the host listens on (checked below), so a host connection is refused. */
const PORT = 39_517;

let work: string;
let host: SandboxHost;
let box: Sandbox;
const servers: Server[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'burrow-listen-'));
  host = await testSandboxHost(join(work, `run-${process.pid}-listen`));
  box = await Sandbox.create(host, { dir: work, name: `listen-${process.pid}`, log: quiet });
  expect(box.mode).toBe('isolated');
});

afterAll(async () => {
  for (const s of servers) s.close();
  await box?.stop();
  await host?.close();
  rmSync(work, { recursive: true, force: true });
});

/** Whether a TCP connection to 127.0.0.1:port from the server's own namespace is accepted. */
function hostAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s: Socket = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** The command lines of the sandbox's live processes. */
function commandLines(): string[] {
  return box.pids().flatMap((pid) => {
    try {
      return [readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')];
    } catch {
      return [];
    }
  });
}

describe('Sandbox.listen', () => {
  it('opens the listener inside the instance only, and serves what its processes send', async () => {
    expect(await hostAccepts(PORT)).toBe(false);
    const t = performance.now();
    const server = await box.listen(PORT);
    const ms = performance.now() - t;
    servers.push(server);
    console.log(`listen inside the instance: ${ms.toFixed(1)} ms`);
    const got = new Promise<string>((resolve) =>
      server.once('connection', (c: Socket) => {
        let text = '';
        c.on('data', (d: Buffer) => (text += d.toString()));
        c.on('end', () => resolve(text));
      }),
    );
    // a client inside: the instance's own loopback
    const r = await box.exec(
      [
        '/usr/bin/perl',
        '-e',
        `socket(my $s, 2, 1, 0) or die; connect($s, pack("S n C4 x8", 2, ${PORT}, 127, 0, 0, 1)) or die "connect: $!"; syswrite($s, "from inside"); close($s)`,
      ],
      { env: { PATH: SANDBOX_PATH }, timeoutMs: 10_000 },
    );
    expect(r.stderr.toString()).toBe('');
    expect(r.code).toBe(0);
    expect(await got).toBe('from inside');
    // the host's loopback has nothing on that port: the socket lives in the instance's namespace
    expect(await hostAccepts(PORT)).toBe(false);
  });

  it('leaves no process behind once the socket is handed over', async () => {
    servers.push(await box.listen(PORT + 1));
    const deadline = Date.now() + 5000;
    while (commandLines().some((c) => c.includes('NODE_HANDLE')) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(commandLines().filter((c) => c.includes('NODE_HANDLE'))).toEqual([]);
  });

  it('says why when the port is taken inside', async () => {
    await expect(box.listen(PORT)).rejects.toThrow(
      new RegExp(`could not open port ${PORT} inside the instance: bind 127\\.0\\.0\\.1:${PORT}`),
    );
  });

  it('gives no process of the instance a Node IPC channel', () => {
    expect(() =>
      box.spawn(['/bin/true'], {
        env: { PATH: SANDBOX_PATH },
        stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
      }),
    ).toThrow('no IPC channel');
  });
});
