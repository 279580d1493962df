/**
 * Connections the egress refuses for being past its cap (src/server/sandbox/egress/egress.ts): each is
 * answered and closed within a fixed time however much its peer keeps sending, and the answers
 * themselves are bounded, so an instance cannot make the server hold descriptors without end.
 * (The second attack kept 14,000 such sockets open by sending a byte a second to each.)
 */
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../src/server/instances/runtime.js';
import { Egress } from '../../src/server/sandbox/egress/egress.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };
const CAP = 4;

const egress = new Egress(
  { blockedDomains: [], allowHostLoopback: false, allowHostPorts: [], protectedPorts: () => [] },
  quiet,
  { maxConnections: CAP },
);
let held = 0;
const listener = net.createServer((s) => {
  held++;
  s.once('close', () => held--);
  egress.handle(s);
});
let port = 0;
const open: net.Socket[] = [];

beforeAll(async () => {
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  port = (listener.address() as AddressInfo).port;
});
afterAll(() => {
  for (const s of open) s.destroy();
  egress.close();
  listener.close();
});

/** A connection, and a promise of its close (listened to from the start: it may come soon). */
const connect = () =>
  new Promise<{ socket: net.Socket; closed: Promise<unknown> }>((resolve) => {
    // half-open allowed: like the attacker's, it does not close when the server ends its side
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () =>
      resolve({ socket, closed }),
    );
    const closed = new Promise((r) => socket.once('close', r));
    socket.on('error', () => {});
    open.push(socket);
  });

describe('connections past the egress cap', () => {
  it('are closed within the linger time even while their peer keeps sending, and never pile up', async () => {
    for (let i = 0; i < CAP; i++) await connect(); // the cap's worth, idle
    const refused = await Promise.all(Array.from({ length: 3 * CAP }, connect));
    const chatter = setInterval(() => {
      for (const { socket } of refused) if (!socket.destroyed) socket.write('x');
    }, 200);
    try {
      // at most the cap's worth of refused ones is held while they linger
      await new Promise((r) => setTimeout(r, 300));
      expect(held).toBeLessThanOrEqual(2 * CAP);
      const closed = await Promise.race([
        Promise.all(refused.map((c) => c.closed)).then(() => true),
        new Promise((r) => setTimeout(() => r(false), 5_000)),
      ]);
      expect(closed, `refused sockets still open after 5 s of chatter (held ${held})`).toBe(true);
    } finally {
      clearInterval(chatter);
    }
    expect(held).toBe(CAP);
  });
});
