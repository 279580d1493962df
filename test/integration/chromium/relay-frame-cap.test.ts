/**
 * The relay's cap on a `cdp_url` client's frame, from the client's side: a frame whose header
 * declares more than `CDP_MAX_COMMAND_BYTES` closes that client with 1009 as soon as the header is
 * read, before its payload is sent, so the server never buffers or parses it. Without the cap the
 * server would wait for the payload (and then hold and parse it on its main thread): no close
 * comes, and the deadline below says so in seconds, not a test timeout.
 */
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CDP_MAX_COMMAND_BYTES } from '../../../src/api/cdp-limits.js';
import { raceDeadline, TIMED_OUT } from '../../../src/internal/deadline.js';
import { startBrowser, testServer, type TestServer } from '../../helpers/server.js';

/** How long the close may take once the header is sent: a read of a few bytes, on a busy host. */
const PROMPTLY_MS = 5_000;

let server: TestServer;
let id: string;
let cdpUrl: string;

beforeAll(async () => {
  server = await testServer({ maxInstances: 2 });
  ({ id, cdpUrl } = await startBrowser(server));
});
afterAll(async () => {
  if (id) await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  await server?.close();
});

/** A masked text frame's header declaring `length` bytes of payload, and its mask key. */
function frameHeader(length: number): Buffer {
  const head = Buffer.alloc(14);
  head[0] = 0x81; // FIN, text
  head[1] = 0x80 | 127; // masked, 64-bit length
  head.writeBigUInt64BE(BigInt(length), 2);
  head.writeUInt32BE(0x01020304, 10); // mask key
  return head;
}

async function client() {
  const ws = new WebSocket(cdpUrl, { perMessageDeflate: false });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  ws.on('error', () => {});
  /** The socket under the client: frames written by hand, as an attacker's client would. */
  const socket = (ws as unknown as { _socket: Socket })._socket;
  return { ws, closed, socket };
}

describe('a cdp_url client sending a frame past the cap', () => {
  it('is closed with 1009 as soon as the header says so, before any payload', async () => {
    const { closed, socket } = await client();
    const started = performance.now();
    socket.write(frameHeader(CDP_MAX_COMMAND_BYTES + 1));
    socket.write(Buffer.alloc(1024, 0x20)); // a first kilobyte of payload, then nothing
    const outcome = await raceDeadline(closed, PROMPTLY_MS);
    expect(outcome, `no close within ${PROMPTLY_MS} ms of the header`).not.toBe(TIMED_OUT);
    expect(outcome).toMatchObject({ code: 1009 });
    expect(performance.now() - started).toBeLessThan(PROMPTLY_MS);
  });

  it('a header declaring 4 GiB: the same, and the browser answers the next client', async () => {
    const { closed, socket } = await client();
    socket.write(frameHeader(4 * 1024 ** 3));
    const outcome = await raceDeadline(closed, PROMPTLY_MS);
    expect(outcome, `no close within ${PROMPTLY_MS} ms of the header`).not.toBe(TIMED_OUT);
    expect(outcome).toMatchObject({ code: 1009 });

    const other = new WebSocket(cdpUrl, { perMessageDeflate: false });
    await new Promise((resolve, reject) => other.once('open', resolve).once('error', reject));
    const reply = new Promise<string>((resolve) =>
      other.once('message', (d) => resolve(d.toString())),
    );
    other.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' }));
    expect(JSON.parse(await reply)).toHaveProperty('result.product');
    other.close();
  });
});
