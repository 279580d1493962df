/**
 * What the `cdp_url` relay adds to a CDP round trip. `node --import tsx bench/relay.ts [N]`
 * (default 1000) starts one Chromium the way instances run it (DevTools over a pipe, shared by the
 * server and the relay through src/server/chromium/mux.ts) and additionally lets it listen on a
 * loopback port, so that the same browser can be driven two ways by the same WebSocket client:
 *
 *   relay    ws → burrow's relay (src/server/chromium/relay.ts) → mux → pipe → Chromium
 *   direct   ws → Chromium's own DevTools port (bare CDP, what a local script uses)
 *   hop      ws → a bare TCP proxy in the relay's process (bytes passed on, nothing read) →
 *            Chromium's own port: what any relay in a process of its own costs at least
 *
 * Each way attaches to the same page and runs N `Runtime.evaluate` round trips (in interleaved
 * blocks of 50), then a screenshot loop; it prints p50/p99 per round trip, the added latency, and
 * the throughput ratio. The relay runs in a process of its own, as in the server; the sandbox
 * around Chromium is left out (it does not sit on this path: the pipe is the same either way).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { ChromiumSession } from '../src/server/chromium/session.js';
import { median, percentile } from './stats.js';

const n = Number((process.argv[2] === '--serve' ? undefined : process.argv[2]) ?? 1000);
if (!Number.isInteger(n) || n < 50) throw new Error('usage: bench/relay.ts [N ≥ 50]');
const BLOCK = 50;
const SHOTS = Math.max(10, Math.round(n / 20));

const dir = mkdtempSync(join(tmpdir(), 'brelay-'));

/**
 * The server side, in a process of its own as in a real deployment (its garbage collection and
 * event loop are not the client's): Chromium on a pipe plus the relay, and Chromium's own port.
 * Prints `{ relay, direct, targetId }` on stdout and runs until stdin closes.
 */
async function serve(): Promise<void> {
  const http = createServer();
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as AddressInfo).port;
  const quiet = { info() {}, warn() {}, error() {}, debug() {} } as never;
  const session = await ChromiumSession.launch({
    executablePath: process.env.BURROW_CHROMIUM ?? '/usr/lib/chromium/chromium',
    dir,
    windowSize: [1024, 768],
    args: [
      '--remote-debugging-port=0',
      ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), // unsandboxed here: root needs it
    ],
    relayUrl: `ws://127.0.0.1:${port}/cdp/bench`,
    token: 'bench',
    log: quiet,
    onExit: () => {},
  });
  http.on('upgrade', (req, socket, head) => {
    const rest = (req.url ?? '').replace(/^\/cdp\/bench\//, '').replace(/\?.*$/, '');
    session.upgrade(rest, req, socket, head);
  });
  const [directPort, browserPath] = readFileSync(join(dir, 'profile', 'DevToolsActivePort'), 'utf8')
    .trim()
    .split('\n');
  const hop = createTcpServer((client) => {
    const upstream = connect(Number(directPort), '127.0.0.1');
    for (const s of [client, upstream]) s.setNoDelay(true).on('error', () => client.destroy());
    client.pipe(upstream).pipe(client);
    client.once('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => hop.listen(0, '127.0.0.1', resolve));
  process.stdout.write(
    `${JSON.stringify({
      relay: session.cdpUrl,
      direct: `ws://127.0.0.1:${directPort}${browserPath}`,
      hop: `ws://127.0.0.1:${(hop.address() as AddressInfo).port}${browserPath}`,
      targetId: session.tabs()[0]!.targetId,
    })}\n`,
  );
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.once('end', resolve));
  await session.close();
  http.close();
  hop.close();
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv.includes('--serve')) {
  await serve();
  process.exit(0);
}
rmSync(dir, { recursive: true, force: true });

const server = spawn(
  process.execPath,
  ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve'],
  {
    stdio: ['pipe', 'pipe', 'inherit'],
  },
);
const endpoints = await new Promise<{
  relay: string;
  direct: string;
  hop: string;
  targetId: string;
}>((resolve, reject) => {
  createInterface({ input: server.stdout! }).once('line', (line) => resolve(JSON.parse(line)));
  server.once('exit', (code) => reject(new Error(`the relay process exited (${code})`)));
});

/** A minimal CDP client: one command at a time, replies matched by id. */
class Client {
  readonly #ws: WebSocket;
  #id = 0;
  readonly #waiting = new Map<number, (msg: { result?: unknown; error?: unknown }) => void>();
  sessionId = '';
  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: unknown };
      if (msg.id !== undefined) this.#waiting.get(msg.id)?.(msg);
    });
  }
  static async open(url: string): Promise<Client> {
    const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return new Client(ws);
  }
  send<T>(method: string, params: object = {}, sessionId = this.sessionId): Promise<T> {
    const id = ++this.#id;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, (msg) => {
        this.#waiting.delete(id);
        if (msg.error) reject(new Error(JSON.stringify(msg.error)));
        else resolve(msg.result as T);
      });
      this.#ws.send(JSON.stringify({ id, method, params, ...(sessionId && { sessionId }) }));
    });
  }
  close(): void {
    this.#ws.close();
  }
}

const clients = {
  relay: await Client.open(endpoints.relay),
  direct: await Client.open(endpoints.direct),
  hop: await Client.open(endpoints.hop),
};
type Way = keyof typeof clients;
// a page with some content, so that screenshots encode something
for (const c of Object.values(clients)) {
  const { sessionId } = await c.send<{ sessionId: string }>(
    'Target.attachToTarget',
    { targetId: endpoints.targetId, flatten: true },
    '',
  );
  c.sessionId = sessionId;
}
await clients.direct.send('Page.navigate', {
  url: `data:text/html,${encodeURIComponent(
    '<body style="margin:0;background:linear-gradient(45deg,#246,#fc8)"><h1>relay bench</h1>' +
      '<p>'.padEnd(4000, 'lorem ipsum ') +
      '</p></body>',
  )}`,
});
await new Promise((r) => setTimeout(r, 500));

const rtt: Record<Way, number[]> = { relay: [], direct: [], hop: [] };
const ways = Object.keys(clients) as Way[];
try {
  for (const way of ways)
    for (let i = 0; i < 200; i++) await clients[way].send('Runtime.evaluate', { expression: '1' }); // warm-up
  for (let done = 0; done < n; done += BLOCK) {
    for (const way of done % (2 * BLOCK) === 0 ? ways : [...ways].reverse()) {
      for (let i = 0; i < BLOCK; i++) {
        const t0 = performance.now();
        await clients[way].send('Runtime.evaluate', { expression: '1+1', returnByValue: true });
        rtt[way].push(performance.now() - t0);
      }
    }
  }
  const shots: Record<Way, number> = { relay: 0, direct: 0, hop: 0 };
  let bytes = 0;
  for (let round = 0; round < 4; round++) {
    for (const way of round % 2 === 0 ? ways : [...ways].reverse()) {
      const t0 = performance.now();
      for (let i = 0; i < SHOTS / 4; i++) {
        const { data } = await clients[way].send<{ data: string }>('Page.captureScreenshot', {
          format: 'png',
        });
        bytes = data.length;
      }
      shots[way] += performance.now() - t0;
    }
  }
  const f = (x: number) => `${x.toFixed(3)} ms`;
  const p = (way: Way, q: number) => (q === 50 ? median(rtt[way]) : percentile(rtt[way], q));
  console.log(
    `CDP Runtime.evaluate round trips, ${n} per way, same Chromium (DevTools pipe + relay vs its own port)`,
  );
  const added = (way: Way, q: number) => f(p(way, q) - p('direct', q));
  const throughput = (way: Way) =>
    (rtt.direct.reduce((a, b) => a + b, 0) / rtt[way].reduce((a, b) => a + b, 0)).toFixed(3);
  console.log(`  relay   p50 ${f(p('relay', 50))}   p99 ${f(p('relay', 99))}`);
  console.log(`  hop     p50 ${f(p('hop', 50))}   p99 ${f(p('hop', 99))}`);
  console.log(`  direct  p50 ${f(p('direct', 50))}   p99 ${f(p('direct', 99))}`);
  console.log(
    `  added by the relay: p50 ${added('relay', 50)}, p99 ${added('relay', 99)}; throughput ${throughput('relay')}× direct`,
  );
  console.log(
    `  added by a bare TCP hop (the floor of any relay process): p50 ${added('hop', 50)}, p99 ${added('hop', 99)}; throughput ${throughput('hop')}× direct`,
  );
  const perSec = (way: Way) => ((SHOTS / shots[way]) * 1000).toFixed(1);
  console.log(
    `screenshots (${SHOTS} PNGs per way, ${(bytes / 1024).toFixed(0)} KiB base64 each): relay ${perSec('relay')}/s, hop ${perSec('hop')}/s, direct ${perSec('direct')}/s = relay ${(shots.direct / shots.relay).toFixed(3)}× direct`,
  );
} finally {
  for (const c of Object.values(clients)) c.close();
  server.stdin!.end();
  await new Promise((resolve) => server.once('exit', resolve));
}
