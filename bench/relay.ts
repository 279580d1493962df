/**
 * What the `cdp_url` relay adds to a CDP round trip. `node --import tsx bench/relay.ts [N]`
 * (default 1000) starts Chromium the way instances run it (DevTools over a pipe, shared by the
 * server and the relay through src/server/chromium/mux.ts) and additionally lets it listen on a
 * loopback port, so that the same browser can be driven several ways by the same WebSocket client:
 *
 *   relay    ws → burrow's relay (src/server/chromium/relay.ts) → mux → pipe → Chromium
 *   direct   ws → Chromium's own DevTools port (bare CDP, what a local script uses)
 *   hop      ws → a bare TCP proxy in the relay's process (bytes passed on, nothing read) →
 *            Chromium's own port: what any relay in a process of its own costs at least
 *
 * Two such browsers run in the same run: one behind a server in a process of its own (`burrow
 * serve`: the client reaches the relay over loopback, another process wakes up twice per round
 * trip), one in the script's own process (the embedded default of `openSession`, where the relay
 * runs beside the driver). Each way attaches to the browser's page and runs N `Runtime.evaluate`
 * round trips (all ways interleaved in blocks of 50), then a screenshot loop; the bench prints
 * p50/p99 per round trip, the added latency, and the throughput ratio against the same browser's
 * own port. The sandbox around Chromium is left out (it is not on this path: the pipe is the
 * same either way).
 */
import { setTimeout as sleep } from 'node:timers/promises';
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

interface Endpoints {
  relay: string;
  direct: string;
  hop: string;
  targetId: string;
}

/**
 * Chromium on a pipe plus the relay, Chromium's own port and a bare proxy to it, in this process;
 * `close` stops them.
 */
async function launch(dir: string): Promise<Endpoints & { close(): Promise<void> }> {
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
  return {
    relay: session.cdpUrl,
    direct: `ws://127.0.0.1:${directPort}${browserPath}`,
    hop: `ws://127.0.0.1:${(hop.address() as AddressInfo).port}${browserPath}`,
    targetId: session.tabs()[0]!.targetId,
    close: async () => {
      await session.close();
      http.close();
      hop.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The server side, in a process of its own as in a real deployment (its garbage collection and
 * event loop are not the client's). Prints its endpoints on stdout and runs until stdin closes.
 */
async function serve(): Promise<void> {
  const { close, ...endpoints } = await launch(mkdtempSync(join(tmpdir(), 'brelay-')));
  process.stdout.write(`${JSON.stringify(endpoints)}\n`);
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.once('end', resolve));
  await close();
}

if (process.argv.includes('--serve')) {
  await serve();
  process.exit(0);
}

const server = spawn(
  process.execPath,
  ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve'],
  {
    stdio: ['pipe', 'pipe', 'inherit'],
  },
);
const remote = await new Promise<Endpoints>((resolve, reject) => {
  createInterface({ input: server.stdout! }).once('line', (line) => resolve(JSON.parse(line)));
  server.once('exit', (code) => reject(new Error(`the relay process exited (${code})`)));
});
const embedded = await launch(mkdtempSync(join(tmpdir(), 'brelay-')));

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

/** Where the relay runs: a server process of its own, or this (the script's) process. */
const setups = { server: remote, embedded } as const;
type Setup = keyof typeof setups;
type Kind = 'relay' | 'hop' | 'direct';
const kinds: Kind[] = ['relay', 'hop', 'direct'];
type Way = `${Setup}:${Kind}`;
const ways = (Object.keys(setups) as Setup[]).flatMap((setup) =>
  kinds.filter((k) => setup === 'server' || k !== 'hop').map((k) => `${setup}:${k}` as Way),
);
const clients = {} as Record<Way, Client>;
for (const way of ways) {
  const [setup, kind] = way.split(':') as [Setup, Kind];
  const c = await Client.open(setups[setup][kind]);
  const { sessionId } = await c.send<{ sessionId: string }>(
    'Target.attachToTarget',
    { targetId: setups[setup].targetId, flatten: true },
    '',
  );
  c.sessionId = sessionId;
  clients[way] = c;
}
// a page with some content, so that screenshots encode something
for (const setup of Object.keys(setups) as Setup[]) {
  await clients[`${setup}:direct`].send('Page.navigate', {
    url: `data:text/html,${encodeURIComponent(
      '<body style="margin:0;background:linear-gradient(45deg,#246,#fc8)"><h1>relay bench</h1>' +
        '<p>'.padEnd(4000, 'lorem ipsum ') +
        '</p></body>',
    )}`,
  });
}
await sleep(500);

const rtt = Object.fromEntries(ways.map((w) => [w, [] as number[]])) as Record<Way, number[]>;
const shots = Object.fromEntries(ways.map((w) => [w, 0])) as Record<Way, number>;
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
  const sum = (way: Way) => rtt[way].reduce((a, b) => a + b, 0);
  console.log(
    `CDP Runtime.evaluate round trips, ${n} per way; each browser: DevTools pipe + relay vs its own port`,
  );
  for (const setup of Object.keys(setups) as Setup[]) {
    const direct = `${setup}:direct` as const;
    console.log(
      setup === 'server'
        ? '  relay in a server process of its own (burrow serve)'
        : "  relay in the script's process (the embedded default of openSession)",
    );
    for (const kind of kinds) {
      const way = `${setup}:${kind}` as Way;
      if (!ways.includes(way)) continue;
      const extra =
        kind === 'direct'
          ? ''
          : `   added p50 ${f(p(way, 50) - p(direct, 50))}, p99 ${f(p(way, 99) - p(direct, 99))}; throughput ${(sum(direct) / sum(way)).toFixed(3)}× direct`;
      console.log(`    ${kind.padEnd(7)} p50 ${f(p(way, 50))}   p99 ${f(p(way, 99))}${extra}`);
    }
  }
  console.log(
    '    (hop: a bare TCP proxy in the server process, nothing read: what any relay process costs at least)',
  );
  const perSec = (way: Way) => ((SHOTS / shots[way]) * 1000).toFixed(1);
  console.log(
    `screenshots (${SHOTS} PNGs per way, ${(bytes / 1024).toFixed(0)} KiB base64 each): ${(
      Object.keys(setups) as Setup[]
    )
      .map(
        (setup) =>
          `${setup} relay ${perSec(`${setup}:relay`)}/s vs direct ${perSec(`${setup}:direct`)}/s = ${(shots[`${setup}:direct`] / shots[`${setup}:relay`]).toFixed(3)}×`,
      )
      .join('; ')}`,
  );
} finally {
  for (const c of Object.values(clients)) c.close();
  await embedded.close();
  server.stdin!.end();
  await new Promise((resolve) => server.once('exit', resolve));
}
