/**
 * A WebSocket client that starts a text message and sends one 1-byte piece after every 63 KiB of
 * unsolicited pongs, never the last (attack3's E3, attack4's L): each piece used to be kept as a
 * view of the socket read it came in, so 1 byte kept 64 KiB. `sendPieces` runs it in a process of
 * its own and resolves once it has sent them all, with the bytes sent and a way to end it;
 * `attackWithPieces` sends them to a server in this process and checks what it held.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { expect } from 'vitest';
import { PIECE_CHARGE, assemblingBytes } from '../../src/server/chromium/unmask.js';
import { eventually } from './server.js';

const MiB = 1024 * 1024;

const ATTACKER = `
import WebSocket from 'ws';
const protocols = process.env.PROTOCOL ? [process.env.PROTOCOL] : [];
const ws = new WebSocket(process.env.URL, protocols);
ws.on('message', () => {});
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

/** Sends `pieces` pieces to `url` (with a subprotocol if given); resolves once all are sent. */
export async function sendPieces(url: string, pieces: number, protocol?: string) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', ATTACKER], {
    env: { ...process.env, URL: url, N: String(pieces), PROTOCOL: protocol ?? '' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = once(child, 'exit');
  await eventually(
    () => out.includes('sent') || child.exitCode !== null,
    'the pieces sent',
    120_000,
  );
  if (!out.includes('sent')) throw new Error(`the attacker exited ${child.exitCode}: ${out}`);
  return {
    sent: Number(/sent (\d+)/.exec(out)![1]),
    /** Ends the attacker (its connection closes). */
    end: async () => {
      child.stdin.write('x');
      await exited;
    },
  };
}

/**
 * Sends `pieces` pieces to `url`, served by a server in this process: every piece but the first
 * is held, charged `PIECE_CHARGE` each; the RSS grows by less than 64 MiB (the old code kept
 * about what was sent, 182 MiB for 3,000); all is let go once the attacker's connection closes.
 */
export async function attackWithPieces(url: string, pieces: number, protocol?: string) {
  global.gc?.();
  const rss0 = process.memoryUsage.rss();
  let peak = rss0;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  try {
    const { sent, end } = await sendPieces(url, pieces, protocol);
    await eventually(
      () => assemblingBytes() === (pieces + 1) * PIECE_CHARGE,
      `the pieces charged (${assemblingBytes()})`,
      30_000,
    );
    peak = Math.max(peak, process.memoryUsage.rss());
    console.log('message pieces:', {
      url: new URL(url).pathname,
      sentMiB: sent / MiB,
      grewMiB: (peak - rss0) / MiB,
    });
    expect(sent).toBeGreaterThan(pieces * 62_000); // about what the old code kept
    expect(peak - rss0, `RSS ${rss0} → ${peak}`).toBeLessThan(64 * MiB);
    await end();
    await eventually(() => assemblingBytes() === 0, 'the pieces let go', 30_000);
  } finally {
    clearInterval(sampler);
  }
}
