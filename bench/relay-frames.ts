/**
 * What a `cdp_url` client's large frame costs the server's main thread while it is received.
 * `node --import tsx bench/relay-frames.ts [FRAMES]` (default 4) runs a WebSocket server with the
 * relay's options (no compression, `maxPayload` = `CDP_MAX_COMMAND_BYTES`) in this process, two
 * ways, and a client in a process of its own that sends FRAMES commands of 90 MiB, each after the
 * reply to the one before:
 *
 *   ws        `ws` alone: without `bufferutil` it unmasks a frame in one JavaScript pass once the
 *             whole frame has arrived
 *   relay     as the relay receives: unmasked, and long payloads assembled, as the bytes arrive
 *             (src/server/chromium/unmask.ts)
 *
 * It prints, per way, the longest gap between two 5 ms timers of this process (the longest time
 * nothing else could run: another client's `/livez` waits as long) and the event-loop delay p99.
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { WebSocketServer } from 'ws';
import { CDP_MAX_COMMAND_BYTES } from '../src/api/cdp-limits.js';
import { unmaskAsReceived } from '../src/server/chromium/unmask.js';

const frames = Number(process.argv[2] ?? 4);
if (!Number.isInteger(frames) || frames < 1)
  throw new Error('usage: bench/relay-frames.ts [N ≥ 1]');

const CLIENT = `
import WebSocket from 'ws';
const ws = new WebSocket(process.env.URL, { perMessageDeflate: false });
const msg = Buffer.from(\`{"id":1,"method":"Runtime.evaluate","params":{"x":"\${'x'.repeat(90 * 2 ** 20)}"}}\`);
let left = Number(process.env.FRAMES);
ws.on('open', () => ws.send(msg));
ws.on('message', () => (--left === 0 ? ws.close() : ws.send(msg)));
`;

async function run(way: 'ws' | 'relay') {
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: CDP_MAX_COMMAND_BYTES,
  });
  const server = createServer();
  server.on('upgrade', (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      if (way === 'relay') unmaskAsReceived(ws, CDP_MAX_COMMAND_BYTES);
      ws.on('message', () => ws.send('ok'));
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  let worst = 0;
  let last = performance.now();
  const tick = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CLIENT], {
    env: { ...process.env, URL: url, FRAMES: String(frames) },
  });
  clearInterval(tick);
  delay.disable();
  server.close();
  console.log(
    `${way.padEnd(6)} ${frames} × 90 MiB: longest stall ${Math.round(worst)} ms, ` +
      `event-loop delay p99 ${Math.round(delay.percentile(99) / 1e6)} ms`,
  );
}

await run('ws');
await run('relay');
