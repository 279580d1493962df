/**
 * The egress's TLS server-name check, attacked with hellos a normal client never sends: two names
 * (the blocked one first or second), a blocked name in another spelling, two server_name
 * extensions, a hello cut short or with lengths that do not add up, a blocked name spread over
 * one-byte records. Each must close the tunnel with nothing forwarded; a hello naming only an
 * allowed host, and bytes that are not TLS, pass (so a refusal is the check, not a broken tunnel).
 */
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/server/instances/runtime.js';
import { Egress } from '../../../src/server/sandbox/egress/egress.js';

const quiet: Logger = { info() {}, warn() {}, error() {}, debug() {} };

let upstream: net.Server;
let upstreamPort: number;
/** Bytes the upstream received, per connection. */
const received: Buffer[] = [];
let proxy: net.Server;
let proxyPort: number;
let egress: Egress;

beforeAll(async () => {
  upstream = net.createServer((s) => {
    const i = received.push(Buffer.alloc(0)) - 1;
    s.on('data', (d: Buffer) => (received[i] = Buffer.concat([received[i]!, d])));
    s.on('error', () => {});
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  egress = new Egress(
    {
      blockedDomains: ['blocked.test'],
      allowHostLoopback: false,
      allowHostPorts: [upstreamPort],
      protectedPorts: () => [],
    },
    quiet,
    { helloTimeoutMs: 500 },
  );
  proxy = net.createServer({ allowHalfOpen: true }, (s) => egress.handle(s));
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyPort = (proxy.address() as AddressInfo).port;
});

afterAll(() => {
  egress?.close();
  proxy?.close();
  upstream?.close();
});

/** server_name extension data listing host names. */
function serverNames(...names: string[]): Buffer {
  const entries = Buffer.concat(
    names.map((name) => {
      const n = Buffer.from(name);
      return Buffer.concat([Buffer.from([0, n.length >> 8, n.length & 255]), n]);
    }),
  );
  return Buffer.concat([Buffer.from([entries.length >> 8, entries.length & 255]), entries]);
}

/** A ClientHello record with these extensions `[type, data]`. */
function hello(...extensions: [number, Buffer][]): Buffer {
  const exts = Buffer.concat(
    extensions.map(([type, data]) => {
      const h = Buffer.alloc(4);
      h.writeUInt16BE(type, 0);
      h.writeUInt16BE(data.length, 2);
      return Buffer.concat([h, data]);
    }),
  );
  const body = Buffer.concat([
    Buffer.from([0x03, 0x03]),
    Buffer.alloc(32, 7), // random
    Buffer.from([0]), // session id
    Buffer.from([0, 2, 0x13, 0x01]), // one cipher suite
    Buffer.from([1, 0]), // null compression
    Buffer.from([exts.length >> 8, exts.length & 255]),
    exts,
  ]);
  const hs = Buffer.concat([Buffer.from([1, 0, body.length >> 8, body.length & 255]), body]);
  return Buffer.concat([Buffer.from([0x16, 0x03, 0x01, hs.length >> 8, hs.length & 255]), hs]);
}

/** The handshake message of `record` re-cut into records of `size` bytes. */
function fragmented(record: Buffer, size: number): Buffer {
  const message = record.subarray(5);
  const out: Buffer[] = [];
  for (let i = 0; i < message.length; i += size) {
    const frag = message.subarray(i, i + size);
    out.push(Buffer.from([0x16, 0x03, 0x01, frag.length >> 8, frag.length & 255]), frag);
  }
  return Buffer.concat(out);
}

/**
 * Opens a tunnel to the upstream, sends `bytes` (then half-closes when `end`), and gives what
 * came back and what the upstream got.
 */
async function tunnel(bytes: Buffer, end = false): Promise<{ back: Buffer; forwarded: Buffer }> {
  const before = received.length;
  const s = net.connect(proxyPort, '127.0.0.1');
  s.on('error', () => {});
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    let head = '';
    const onData = (d: Buffer) => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      s.off('data', onData);
      if (!/^HTTP\/1\.1 200/.test(head)) reject(new Error(`CONNECT refused: ${head}`));
      resolve();
    };
    s.on('data', onData);
    s.write(`CONNECT 127.0.0.1:${upstreamPort} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  });
  s.on('data', (d: Buffer) => chunks.push(d));
  const closed = new Promise<void>((r) => s.once('close', () => r()));
  if (end) s.end(bytes);
  else s.write(bytes);
  await Promise.race([closed, new Promise((r) => setTimeout(r, 1500))]);
  s.destroy();
  await new Promise((r) => setTimeout(r, 50));
  return {
    back: Buffer.concat(chunks),
    forwarded: received.length > before ? received[before]! : Buffer.alloc(0),
  };
}

/** The TLS alert the egress answers a refused hello with (access_denied). */
const ACCESS_DENIED = Buffer.from([0x15, 3, 3, 0, 2, 2, 49]);

describe('the egress SNI check', () => {
  it('passes a hello that names only an allowed host, and bytes that are not TLS', async () => {
    const ok = hello([0, serverNames('ok.test')]);
    expect((await tunnel(ok)).forwarded).toEqual(ok);
    const plain = Buffer.from('SSH-2.0-OpenSSH_9.2\r\n');
    expect((await tunnel(plain)).forwarded).toEqual(plain);
  });

  it.each([
    ['allowed first, blocked second', hello([0, serverNames('ok.test', 'blocked.test')])],
    ['blocked first, allowed second', hello([0, serverNames('www.blocked.test', 'ok.test')])],
    ['blocked in capitals with a trailing dot', hello([0, serverNames('WWW.Blocked.TEST.')])],
    [
      'two server_name extensions, the second blocked',
      hello([0, serverNames('ok.test')], [0, serverNames('blocked.test')]),
    ],
    ['blocked, in one-byte records', fragmented(hello([0, serverNames('blocked.test')]), 1)],
  ])('closes a tunnel whose hello has %s, forwarding nothing', async (_what, bytes) => {
    const { back, forwarded } = await tunnel(bytes);
    expect(forwarded.length).toBe(0);
    expect(back).toEqual(ACCESS_DENIED);
  });

  const good = hello([0, serverNames('ok.test')]);
  const badListLength = Buffer.from(good);
  // the server_name list claims more bytes than its extension holds
  badListLength.writeUInt16BE(0xff, badListLength.indexOf(Buffer.from('ok.test')) - 5);
  const longerHello = Buffer.from(good);
  longerHello.writeUInt16BE(good.length - 9 + 40, 7); // the ClientHello claims bytes never sent
  it.each([
    ['cut short, then the client half-closes', good.subarray(0, 30), true],
    ['a ClientHello longer than what arrives, then the client half-closes', longerHello, true],
    ['a server_name list longer than its extension', badListLength, false],
    ['a handshake that is not a ClientHello', Buffer.from([0x16, 3, 1, 0, 4, 2, 0, 0, 0]), false],
    ['a record of length zero', Buffer.from([0x16, 3, 1, 0, 0]), false],
  ])('closes a tunnel whose hello is malformed: %s', async (_what, bytes, end) => {
    const { back, forwarded } = await tunnel(bytes, end);
    expect(forwarded.length).toBe(0);
    expect(back.subarray(0, 1)).toEqual(Buffer.from([0x15]));
  });

  it('closes a tunnel whose hello never completes', async () => {
    const { back, forwarded } = await tunnel(good.subarray(0, 30));
    expect(forwarded.length).toBe(0);
    expect(back.subarray(0, 1)).toEqual(Buffer.from([0x15]));
  });
});
