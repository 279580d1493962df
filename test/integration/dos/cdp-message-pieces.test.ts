/**
 * What a message sent in many short pieces makes the server hold (src/server/chromium/unmask.ts,
 * `PIECE_CHARGE`): a `cdp_url` holder starts a text message and sends one 1-byte piece after
 * every 63 KiB of unsolicited pongs, never the last. `ws` keeps every piece until the last; each
 * used to be a view of the socket read it came in, so 1 byte charged kept 64 KiB (an outside
 * tester took the server from 117 MiB to 2.6 GiB with three connections). Now each piece is kept
 * in a buffer of its own, charged at least `PIECE_CHARGE`: the server's RSS grows by about what
 * the pieces are charged, not by what was sent.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PIECE_CHARGE, assemblingBytes } from '../../../src/server/chromium/unmask.js';
import { eventually, startBrowser, testServer, type TestServer } from '../../helpers/server.js';

const MiB = 1024 * 1024;
const PIECES = 3000;

/** Sends the first piece, then PIECES × (63 KiB of pongs, a 1-byte piece); prints `sent N`. */
const ATTACKER = `
import WebSocket from 'ws';
const ws = new WebSocket(process.env.URL);
await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
const s = ws._socket;
const pong = Buffer.concat([Buffer.from([0x8a, 0x80 | 125, 0, 0, 0, 0]), Buffer.alloc(125, 0x70)]);
const pongs = Buffer.concat(Array.from({ length: 485 }, () => pong));
const piece = Buffer.from([0x00, 0x81, 0, 0, 0, 0, 0x61]);
const write = (b) => new Promise((r) => (s.write(b) ? r() : s.once('drain', r)));
await write(Buffer.from([0x01, 0x81, 0, 0, 0, 0, 0x7b]));
let sent = 7;
for (let i = 0; i < Number(process.env.N); i++) {
  await write(pongs);
  await write(piece);
  sent += pongs.length + piece.length;
}
console.log('sent', sent);
process.stdin.once('data', () => process.exit(0));
`;

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => {
  await server?.close();
});

describe('a message sent in many short pieces, never finished', () => {
  it('holds what its pieces are charged, not the reads they came in', async () => {
    const { id, cdpUrl } = await startBrowser(server);
    global.gc?.();
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const child = spawn(process.execPath, ['--input-type=module', '-e', ATTACKER], {
      env: { ...process.env, URL: cdpUrl, N: String(PIECES) },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await eventually(() => out.includes('sent'), 'the attacker sent its pieces', 120_000);
      // every piece but the first is held, each charged PIECE_CHARGE
      await eventually(
        () => assemblingBytes() === (PIECES + 1) * PIECE_CHARGE,
        `the pieces charged (${assemblingBytes()})`,
        30_000,
      );
      peak = Math.max(peak, process.memoryUsage().rss);
    } finally {
      clearInterval(sampler);
    }
    const sent = Number(/sent (\d+)/.exec(out)![1]);
    console.log('cdp-message-pieces:', { sentMiB: sent / MiB, grewMiB: (peak - rss0) / MiB });
    expect(sent).toBeGreaterThan(PIECES * 62_000); // about what the old code kept
    expect(peak - rss0, `RSS ${rss0} → ${peak}`).toBeLessThan(64 * MiB);
    child.stdin.write('x');
    await once(child, 'exit');
    await eventually(() => assemblingBytes() === 0, 'the pieces let go', 30_000);
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }, 180_000);
});
