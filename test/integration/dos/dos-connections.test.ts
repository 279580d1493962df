/**
 * Denial of service with connections that never authenticate: raw sockets from one address that
 * send half a request line and then idle must not lock out a real client of the same address
 * (the per-address cap counts authenticated connections; unauthenticated ones have a budget of
 * their own, oldest closed first), and must not cost a real client its open connections. Every
 * loopback address is one client, this host: spreading connections over 127.0.0.2, .3, … does not
 * reset the count.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { otherClients, type OtherClients } from '../../helpers/other-clients.js';
import { useServer } from '../../helpers/use-server.js';

const server = useServer({}, { timeout: 120_000 });
let port = 0;
/** Two clients other than this host (every loopback address is this host, one client). */
let other: OtherClients;

beforeAll(() => {
  port = Number(new URL(server.url).port);
  other = otherClients(2);
});
afterAll(() => other?.remove());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A socket from `localAddress` (any 127.x reaches a loopback server) with what it received. */
function open(localAddress: string) {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress });
  socket.on('error', () => undefined);
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  const connected = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, connected, received: () => text };
}

const authedRequest = (path: string, keepAlive: boolean) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${server.apiKey}\r\n` +
  `Connection: ${keepAlive ? 'keep-alive' : 'close'}\r\n\r\n`;

/** The status of one request with the key on a fresh connection from `localAddress`. */
async function statusFrom(localAddress: string): Promise<number | undefined> {
  const c = open(localAddress);
  await c.connected;
  c.socket.write(authedRequest('/v1/instances', false));
  await new Promise<void>((resolve) => {
    c.socket.once('close', () => resolve());
    setTimeout(() => resolve(), 5_000);
  });
  c.socket.destroy();
  const m = /^HTTP\/1\.1 (\d{3})/.exec(c.received());
  return m ? Number(m[1]) : undefined;
}

describe('half-open connections from one address', () => {
  it('100 idle sockets with half a request line do not lock out a real client there', async () => {
    const address = '127.0.0.21';
    const crowd = Array.from({ length: 100 }, () => open(address));
    try {
      await Promise.all(crowd.map((c) => c.connected));
      for (const c of crowd) c.socket.write('GET /v1/instances HT');
      await sleep(1_500); // every one of them is now old enough to give way

      expect(await statusFrom(address)).toBe(200);
      expect(await statusFrom(address)).toBe(200);
      // the crowd was trimmed to the unauthenticated budget, not left to fill the cap
      const open_ = crowd.filter((c) => !c.socket.destroyed).length;
      expect(open_).toBeLessThanOrEqual(32);
    } finally {
      for (const c of crowd) c.socket.destroy();
    }
  });

  it('a flood of unauthenticated sockets never closes a real client’s open connections', async () => {
    const address = '127.0.0.22';
    const mine = Array.from({ length: 4 }, () => open(address));
    await Promise.all(mine.map((c) => c.connected));
    for (const c of mine) c.socket.write(authedRequest('/v1/instances', true));
    await sleep(300);
    for (const c of mine) expect(c.received()).toMatch(/^HTTP\/1\.1 200 /);

    const crowd = Array.from({ length: 80 }, () => open(address));
    try {
      await Promise.all(crowd.map((c) => c.connected));
      for (const c of crowd) c.socket.write('GET /v1/inst');
      await sleep(1_200);
      for (const c of crowd.slice(0, 40)) c.socket.write(''); // still idle
      // a second wave makes the first give way
      const wave = Array.from({ length: 40 }, () => open(address));
      crowd.push(...wave);
      await Promise.all(wave.map((c) => c.connected));
      await sleep(300);

      for (const c of mine) {
        expect(c.socket.destroyed).toBe(false);
        const before = c.received().length;
        c.socket.write(authedRequest('/v1/instances', true));
        await sleep(200);
        expect(c.received().slice(before)).toMatch(/^HTTP\/1\.1 200 /);
      }
    } finally {
      for (const c of [...mine, ...crowd]) c.socket.destroy();
    }
  });

  it('authenticated connections are still capped at 64 per address', async () => {
    const address = other.addresses[0]!;
    const crowd = Array.from({ length: 64 }, () => open(address));
    try {
      await Promise.all(crowd.map((c) => c.connected));
      for (const c of crowd) c.socket.write(authedRequest('/v1/instances', true));
      await sleep(800);
      expect(crowd.every((c) => /^HTTP\/1\.1 200 /.test(c.received()))).toBe(true);

      expect(await statusFrom(address)).toBe(429);
      expect(await statusFrom(other.addresses[1]!)).toBe(200);
      expect(await statusFrom('127.0.0.24')).toBe(200);
    } finally {
      for (const c of crowd) c.socket.destroy();
    }
  });
});

describe('connections from many loopback addresses', () => {
  it('are one client, this host: 64 in total, 429 past them, others unaffected', async () => {
    // each of 127.0.0.2 … 127.0.0.9 used to start a count of its own (issue 35)
    const crowd = Array.from({ length: 64 }, (_, i) => open(`127.0.0.${2 + (i % 8)}`));
    try {
      await Promise.all(crowd.map((c) => c.connected));
      for (const c of crowd) c.socket.write(authedRequest('/v1/instances', true));
      await sleep(800);
      expect(crowd.every((c) => /^HTTP\/1\.1 200 /.test(c.received()))).toBe(true);

      for (const address of ['127.0.0.10', '127.0.0.2', '127.1.2.3', '127.0.0.1']) {
        expect(await statusFrom(address), address).toBe(429);
      }
      expect(await statusFrom(other.addresses[0]!)).toBe(200);
      // one closed frees a place for the host, from any of its addresses
      crowd[0]!.socket.destroy();
      await sleep(200);
      expect(await statusFrom('127.0.0.77')).toBe(200);
    } finally {
      for (const c of crowd) c.socket.destroy();
    }
  });
});
