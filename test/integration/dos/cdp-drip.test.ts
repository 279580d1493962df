/**
 * Long frames sent just fast enough to be kept do not keep others out (attack4's A1;
 * src/server/chromium/unmask.ts, `HOLDING_CLOSE`). A `cdp_url` holder starts five 95 MiB frames,
 * most of the server's total of long frames being received, and sends each on at 1 MiB every
 * 12 s: above the minimum that keeps a silent holder out (1 MiB in each 20 s), so before, the
 * five held the total for over half an hour while another client's 90 MiB command waited its
 * 60 s and was closed (1008). Now, once a frame waits, each frame held must be finished within a
 * window: the dripping connections are closed a window after the command began to wait, and the
 * command is answered.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CDP_MAX_ASSEMBLING_BYTES_TOTAL } from '../../../src/api/cdp-limits.js';
import {
  ASSEMBLING_WAIT_MS,
  HOLDING_CLOSE,
  assemblingBytes,
} from '../../../src/server/chromium/unmask.js';
import { cdpClient } from '../../helpers/cdp-client.js';
import { eventually, startBrowser, testServer, type TestServer } from '../../helpers/server.js';

const MiB = 1024 * 1024;
const FRAME = 95 * MiB;
const HOLDERS = Math.floor(CDP_MAX_ASSEMBLING_BYTES_TOTAL / FRAME);
const COMMAND = 90 * MiB;

/**
 * Opens N raw WebSocket connections to URL; on each sends the header of a masked binary frame of
 * FRAME bytes (the key zero) and its first MiB, then another MiB of it every 12 s. Prints `held`
 * once all are sent their first MiB, and `closed C CODE REASON` when the server closes C.
 */
const ATTACKER = `
import { connect } from 'node:net';
const url = new URL(process.env.URL);
const [n, frame] = [Number(process.env.N), Number(process.env.FRAME)];
const MiB = 1024 * 1024;
const part = Buffer.alloc(MiB, 0x61);
const socks = [];
for (let c = 0; c < n; c++) {
  const sock = connect(Number(url.port), url.hostname);
  await new Promise((r) => sock.once('connect', r));
  let buf = Buffer.alloc(0);
  let upgraded = false;
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    if (!upgraded) {
      const end = buf.indexOf('\\r\\n\\r\\n');
      if (end < 0) return;
      upgraded = true;
      buf = buf.subarray(end + 4);
    }
    if (buf[0] === 0x88 && buf.length >= 2 + buf[1]) {
      console.log('closed ' + c + ' ' + buf.readUInt16BE(2) + ' ' + buf.subarray(4, 2 + buf[1]).toString());
      buf = Buffer.alloc(0);
    }
  });
  sock.on('error', () => {});
  sock.write('GET ' + url.pathname + url.search + ' HTTP/1.1\\r\\nHost: ' + url.host +
    '\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n');
  await new Promise((r) => setTimeout(r, 200));
  const head = Buffer.alloc(14);
  head[0] = 0x82;
  head[1] = 0x80 | 127;
  head.writeUInt32BE(frame, 6);
  sock.write(head);
  sock.write(part);
  socks.push(sock);
}
console.log('held');
setInterval(() => {
  for (const s of socks) if (!s.destroyed) s.write(part);
}, 12_000);
`;

let server: TestServer;
beforeAll(async () => {
  server = await testServer({ maxConnectionsPerClient: 0 });
});
afterAll(async () => {
  await server?.close();
});

describe('long frames sent on just fast enough to be kept', () => {
  it('are closed a window after another frame waits for them, and its command is answered', async () => {
    const { id, cdpUrl } = await startBrowser(server);
    const child = spawn(process.execPath, ['--input-type=module', '-e', ATTACKER], {
      env: { ...process.env, URL: cdpUrl, N: String(HOLDERS), FRAME: String(FRAME) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await eventually(() => out.includes('held'), 'the frames started', 60_000);
      await eventually(
        () => assemblingBytes() === HOLDERS * FRAME,
        `the frames held (${assemblingBytes() / MiB} MiB)`,
        30_000,
      );
      const client = await cdpClient(cdpUrl);
      const began = Date.now();
      // a browser-level command carrying 90 MiB (Chromium ignores a parameter it does not know)
      const answer = client.call('Browser.getVersion', { pad: 'a'.repeat(COMMAND) });
      const outcome = await Promise.race([
        answer.then((reply) => ({ reply })),
        client.closed.then((closed) => ({ closed })),
      ]);
      const waited = Date.now() - began;
      console.log('cdp-drip:', {
        waitedMs: waited,
        outcome: JSON.stringify(outcome).slice(0, 300),
      });
      expect(outcome).toHaveProperty('reply.result.product');
      expect(waited).toBeLessThan(ASSEMBLING_WAIT_MS + 10_000);
      // every dripping connection was closed for holding the others up
      const closes = out.split('\n').filter((l) => l.startsWith('closed '));
      expect(closes).toHaveLength(HOLDERS);
      for (const line of closes) expect(line).toMatch(` 1008 ${HOLDING_CLOSE.reason}`);
      client.ws.close();
    } finally {
      child.kill('SIGKILL');
    }
    await eventually(() => assemblingBytes() === 0, 'the held frames let go', 30_000);
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }, 240_000);
});
