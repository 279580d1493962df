/**
 * `connectInside` (src/server/sandbox/connect.ts) on a real sandbox: the socket is connected in
 * the instance's own view (a link it plants to a host path leads nowhere), bytes its peer sends
 * at once reach the server, and a failure or a frozen instance ends in a bounded, clear error.
 * It also prints what a connection costs (a helper started inside).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import type { Duplex } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Supervised } from '../../../src/internal/process.js';
import type { Logger } from '../../../src/server/instances/runtime.js';
import {
  connectInside,
  Sandbox,
  SANDBOX_PATH,
  type SandboxHost,
} from '../../../src/server/sandbox/index.js';
import { testSandboxHost } from '../../helpers/sandbox.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };

let work: string;
let host: SandboxHost;
let box: Sandbox;
let peer: Supervised;
let hostServer: Server;
const hostPath = `/tmp/burrow-connect-${process.pid}.sock`;
let hostConnections = 0;

/** A server inside the instance on /tmp/peer.sock that greets at once and echoes. */
const PEER = `require('net').createServer((c) => { c.write('hello\\n'); c.pipe(c); })
  .listen('/tmp/peer.sock', () => console.log('up'));`;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'burrow-connect-'));
  host = await testSandboxHost(join(work, `run-${process.pid}-connect`));
  box = await Sandbox.create(host, { dir: work, name: `connect-${process.pid}`, log: quiet });
  expect(box.mode).toBe('isolated');
  peer = box.spawn([process.execPath, '-e', PEER], {
    env: { PATH: SANDBOX_PATH },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  await new Promise((r) => peer.child.stdout!.once('data', r));
  hostServer = createServer(() => hostConnections++);
  await new Promise<void>((r) => hostServer.listen(hostPath, r));
});

afterAll(async () => {
  await box?.stop();
  await host?.close();
  await new Promise((r) => hostServer?.close(r));
  rmSync(hostPath, { force: true });
  rmSync(work, { recursive: true, force: true });
});

/** The first `n` bytes the socket gives. */
function read(socket: Duplex, n: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    socket.on('data', (d: Buffer) => {
      got += d.toString();
      if (got.length >= n) resolve(got);
    });
    socket.once('error', reject);
  });
}

const sh = (command: string) =>
  box.exec(['/bin/sh', '-c', command], { env: { PATH: SANDBOX_PATH }, timeoutMs: 10_000 });

describe('connectInside', () => {
  it('connects in the instance and loses nothing its peer says at once; what it costs', async () => {
    const times: number[] = [];
    for (let i = 0; i < 8; i++) {
      const t = performance.now();
      const s = await connectInside(box, '/tmp/peer.sock');
      times.push(performance.now() - t);
      s.write('ping\n');
      expect(await read(s, 11)).toBe('hello\nping\n');
      s.destroy();
    }
    times.sort((a, b) => a - b);
    console.log(
      `connectInside: median ${times[4]!.toFixed(0)} ms (min ${times[0]!.toFixed(0)}, max ${times.at(-1)!.toFixed(0)})`,
    );
  });

  it("follows a planted link in the instance's view: a host path is not reached", async () => {
    expect((await sh(`ln -sf ${hostPath} /tmp/link.sock && ls -l /tmp/link.sock`)).code).toBe(0);
    await expect(connectInside(box, '/tmp/link.sock')).rejects.toThrow(
      /^cannot connect to \/tmp\/link\.sock inside the instance: connect ENOENT/,
    );
    // a link to the instance's own socket works like that socket
    expect((await sh('ln -sf /tmp/peer.sock /tmp/own.sock')).code).toBe(0);
    const s = await connectInside(box, '/tmp/own.sock');
    expect(await read(s, 6)).toBe('hello\n');
    s.destroy();
    expect(hostConnections).toBe(0);
  });

  it('refuses a relative path, and gives up on a frozen instance within its deadline', async () => {
    await expect(connectInside(box, 'tmp/peer.sock')).rejects.toThrow('not an absolute path');
    await box.pause();
    try {
      const t = performance.now();
      await expect(connectInside(box, '/tmp/peer.sock', 1500)).rejects.toThrow(
        'cannot connect to /tmp/peer.sock inside the instance: no answer within 1500 ms',
      );
      expect(performance.now() - t).toBeLessThan(3000);
    } finally {
      await box.resume();
    }
    const s = await connectInside(box, '/tmp/peer.sock');
    expect(await read(s, 6)).toBe('hello\n');
    s.destroy();
  });
});
