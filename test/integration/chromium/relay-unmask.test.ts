/**
 * The relay's own unmasking (src/server/chromium/unmask.ts) hands `ws` exactly what the client
 * sent: frames of every length encoding (7-bit, 16-bit, 64-bit), fragmented messages, control
 * frames between fragments, binary and text, chunks split anywhere (one byte at a time too), long
 * payloads assembled before `ws` sees them; a frame past `maxPayload` still closes the connection
 * (1009).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { unmaskAsReceived } from '../../../src/server/chromium/unmask.js';

const MAX = 4 * 1024 * 1024;
let server: Server;
let url = '';
/** What the server side received on each connection. */
const received = new Map<string, Buffer[]>();

beforeAll(async () => {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX });
  server = createServer();
  server.on('upgrade', (req, socket, head) => {
    const name = req.url!.slice(1);
    wss.handleUpgrade(req, socket, head, (ws) => {
      unmaskAsReceived(ws, MAX);
      const got: Buffer[] = [];
      received.set(name, got);
      ws.on('message', (data) => {
        got.push(data as Buffer);
        ws.send(String(got.length));
      });
      ws.on('error', () => undefined); // ws closes the connection itself (1009)
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server?.close());

async function client(name: string) {
  const ws = new WebSocket(`${url}/${name}`, { perMessageDeflate: false });
  await new Promise((ok, fail) => ws.once('open', ok).once('error', fail));
  return ws;
}

const replies = (ws: WebSocket, n: number) =>
  new Promise<void>((ok) => {
    let seen = 0;
    ws.on('message', () => ++seen === n && ok());
  });

describe('unmasking as bytes arrive', () => {
  it('hands ws every message as sent, whatever its length and fragments', async () => {
    const ws = await client('lengths');
    const sizes = [0, 1, 3, 125, 126, 127, 65535, 65536, 65537, 1024 * 1024 + 3, MAX];
    const sent = sizes.map((n) => randomBytes(n));
    const done = replies(ws, sent.length + 2);
    for (const b of sent) ws.send(b);
    // a fragmented text message with a ping between its fragments
    ws.send('héllo ', { fin: false });
    ws.ping('p');
    ws.send(Buffer.from('wörld'), { fin: true, binary: false });
    ws.send(Buffer.from('x'.repeat(70_000)), { binary: false });
    await done;
    const got = received.get('lengths')!;
    expect(got.length).toBe(sent.length + 2);
    for (let i = 0; i < sent.length; i++)
      expect(got[i]!.equals(sent[i]!), `size ${sizes[i]}`).toBe(true);
    expect(got[sent.length]!.toString()).toBe('héllo wörld');
    expect(got[sent.length + 1]!.toString()).toBe('x'.repeat(70_000));
    ws.close();
  });

  it('follows frames split across reads anywhere, a byte at a time too', async () => {
    const ws = await client('bytes');
    const raw = (ws as unknown as { _socket: Socket })._socket;
    const writes: Buffer[] = [];
    // capture what the client would send, then send it a byte at a time on the same socket
    const write = raw.write.bind(raw);
    raw.write = ((chunk: Buffer | string) => {
      writes.push(Buffer.from(chunk));
      return true;
    }) as typeof raw.write;
    const messages = [randomBytes(200), randomBytes(70_000), randomBytes(5), randomBytes(MAX - 7)];
    for (const m of messages) ws.send(m);
    raw.write = write;
    const wire = Buffer.concat(writes);
    const done = replies(ws, messages.length);
    for (let i = 0; i < 300; i++) write(wire.subarray(i, i + 1));
    write(wire.subarray(300, 70_000));
    // the long payload (assembled before ws sees it) split inside its header and anywhere after
    const long = wire.length - (MAX - 7) - 10;
    for (let i = 70_000; i < long + 3; i = Math.min(i + 9_999, long + 3))
      write(wire.subarray(i, Math.min(i + 9_999, long + 3)));
    for (let i = long + 3; i < wire.length; i += 65_537) write(wire.subarray(i, i + 65_537));
    await done;
    const got = received.get('bytes')!;
    for (let i = 0; i < messages.length; i++) expect(got[i]!.equals(messages[i]!)).toBe(true);
    ws.close();
  });

  it('a frame past maxPayload still closes the connection (1009)', async () => {
    const sock = connect((server.address() as AddressInfo).port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.write(
      'GET /big HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    // a masked binary frame announcing MAX + 1 bytes (64-bit length)
    const header = Buffer.alloc(14);
    header[0] = 0x82;
    header[1] = 0x80 | 127;
    header.writeUInt32BE(MAX + 1, 6);
    header.set([1, 2, 3, 4], 10);
    sock.write(header);
    sock.write(Buffer.alloc(1024));
    // the server's close frame: 1009 (0x03f1)
    let got = Buffer.alloc(0);
    const CLOSE_1009 = Buffer.from([0x88, 0x02, 0x03, 0xf1]);
    await new Promise<void>((ok) =>
      sock.on('data', (d: Buffer) => {
        got = Buffer.concat([got, d]);
        if (got.includes(CLOSE_1009)) ok();
      }),
    );
    sock.destroy();
    expect(got.includes(CLOSE_1009)).toBe(true);
  });
});
