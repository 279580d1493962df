/**
 * A tunnel without TLS whose lines the `Host` rule reads (src/server/sandbox/egress/splice.ts)
 * takes at most the main thread's bytes of a turn of the event loop (`bytesPerTurn`,
 * src/internal/cpu-share.ts): the read that spends them pauses the instance's side, which is read
 * again in the next turn, and every byte still reaches the upstream in order. Real loopback
 * sockets on both sides; the upstream reads everything.
 */
import net from 'node:net';
import { once } from 'node:events';
import { setImmediate as tick } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { splice } from '../../src/server/sandbox/egress/splice.js';

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A connected pair of loopback sockets: [the side we write to, the side the server holds]. */
async function pair(): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection') as Promise<[net.Socket]>;
  const outside = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await once(outside, 'connect');
  const [inside] = await accepted;
  return [outside, inside];
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };

describe('a tunnel whose lines are read', () => {
  it('pauses past the bytes of a turn, reads on in the next, and passes every byte', async () => {
    const [instance, client] = await pair();
    const [upstream, received] = await pair();
    splice(client, upstream, Buffer.alloc(0), {
      target: { host: '127.0.0.1', port: 80 },
      blocked: () => undefined,
      helloTimeoutMs: 1000,
      log: silent as never,
    });
    const chunks: Buffer[] = [];
    received.on('data', (d: Buffer) => chunks.push(d));
    await tick(); // a turn whose bytes are not spent yet
    // plain lines (not a ClientHello), as 24 socket reads of 64 KiB in one turn
    const first = Buffer.from('GET / HTTP/1.1\r\nHost: a.test\r\n\r\n');
    const reads = [first, ...Array.from({ length: 24 }, () => Buffer.from('x\r\n'.repeat(21845)))];
    const paused: boolean[] = [];
    for (const read of reads) {
      client.emit('data', read);
      paused.push(client.isPaused());
    }
    // the read that spends the turn's MiB (each byte read for its line charged 4: the fifth
    // read of 65,535 bytes after the first flight) pauses the socket; the next turn reads again
    expect(paused.indexOf(true)).toBe(5);
    await tick();
    expect(client.isPaused()).toBe(false);
    const body = Buffer.concat(reads);
    client.emit('end');
    await once(received, 'end');
    expect(Buffer.concat(chunks).equals(body)).toBe(true);
    instance.destroy();
    received.destroy();
  });
});
