/**
 * What a cluster's hop costs. `node --import tsx bench/cluster.ts [N]` (default 1000;
 * `npm run -s bench:cluster`) starts a real PostgreSQL (test/helpers/postgres.ts) and two burrow
 * nodes in this process on loopback ports, as test/integration/cluster/cluster-nodes.test.ts does, starts
 * a browser instance on node 1 (its owner) and measures, against the same instance in the same
 * run:
 *
 *   (a) HTTP: `GET /v1/instance/{id}` on the owner directly and through node 2 (one hop, the
 *       Forwarder of src/server/http/cluster/forward.ts), and through a bare proxy in this process
 *       (the floor of any HTTP hop on this machine at this moment), N each, interleaved in
 *       blocks of 50 over one keep-alive connection per way; p50/p95 and what each way adds to
 *       the owner's p50;
 *   (b) CDP: `Runtime.evaluate("1")` round trips on the instance's page, over a `cdp_url`
 *       WebSocket to the owner and one through node 2, N each, interleaved the same way;
 *   (c) starts: `POST /v1/start` of a browser instance through node 2 and through node 1, and
 *       the first `GET /v1/instance/{id}` of each through the other node. A node places what it
 *       is asked to start on itself until placement picks a node (issue 22, item 4); then the
 *       start through node 2 is the start through a non-owner the issue asks for;
 *   (d) `GET /v1/instances` on node 2 with 500 rows in the instances table: the rows are put
 *       straight into the table through PostgresInstanceStore (copies of the real instance's row
 *       under a node name no node has), not started; p50/p95 of 200 lists.
 *
 * The goals: ≤ +0.5 ms per proxied HTTP request, ≤ +0.1 ms per proxied CDP round trip,
 * list p95 < 50 ms. Everything runs on one machine, so the hop's network is loopback: what is
 * measured is the forwarding node's own work (parse, route, a second connection, copy), which a
 * network between machines adds its round trip to. On a machine busier than its cores, that
 * work's wall-clock time stretches with the run queue, so (a) and (b) also print the CPU time
 * per call, which does not.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { Database } from '../src/server/cluster/database.js';
import { PostgresInstanceStore } from '../src/server/cluster/instance-store.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { testServer, type TestServer } from '../test/helpers/server.js';
import { median, percentile } from './stats.js';

const n = Number(process.argv[2] ?? 1000);
if (!Number.isInteger(n) || n < 100) throw new Error('usage: bench/cluster.ts [N ≥ 100]');
const BLOCK = 50;
const STARTS = 4;
const ROWS = 500;
const LISTS = 200;

const ms = (x: number) => `${x.toFixed(3)} ms`;

/**
 * The floor of any HTTP hop here: a bare proxy in this process that passes each request to
 * `to` over a keep-alive connection (undici, as the Forwarder does) and the answer back, with
 * no key check, routing or id check. What the Forwarder adds beyond it is its own.
 */
async function bareProxy(to: string): Promise<{ url: string; server: Server; agent: Agent }> {
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: 64 });
  const server = createServer((req, res) => {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
    }
    request(to + req.url, { method: req.method as 'GET', headers, dispatcher: agent }).then(
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers as Record<string, string>);
        answer.body.pipe(res);
      },
      () => res.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, server, agent };
}

/** A keep-alive HTTP client of one connection: what a client library holds to a node. */
function client(server: { url: string; apiKey: string }) {
  const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000 });
  const call = async (method: 'GET' | 'POST', path: string, body?: unknown) => {
    const res = await request(server.url + path, {
      method,
      dispatcher: agent,
      headers: {
        'x-api-key': server.apiKey,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  return { call, close: () => agent.close() };
}

/** A CDP connection attached to the browser's first page: `evaluate()` is one round trip. */
async function cdp(url: string) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let next = 0;
  const waiting = new Map<
    number,
    (m: { result?: Record<string, unknown>; error?: unknown }) => void
  >();
  ws.on('message', (data) => {
    const m = JSON.parse(String(data)) as { id?: number; result?: Record<string, unknown> };
    if (m.id !== undefined) waiting.get(m.id)?.(m);
  });
  const send = (method: string, params: object = {}, sessionId?: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const id = ++next;
      waiting.set(id, (m) => {
        waiting.delete(id);
        if (m.error) reject(new Error(`${method}: ${JSON.stringify(m.error)}`));
        else resolve(m.result ?? {});
      });
      ws.send(JSON.stringify({ id, method, params, ...(sessionId && { sessionId }) }));
    });
  const { targetInfos } = (await send('Target.getTargets')) as {
    targetInfos: { targetId: string; type: string }[];
  };
  let page = targetInfos.find((t) => t.type === 'page')?.targetId;
  page ??= ((await send('Target.createTarget', { url: 'about:blank' })) as { targetId: string })
    .targetId;
  const { sessionId } = (await send('Target.attachToTarget', {
    targetId: page,
    flatten: true,
  })) as { sessionId: string };
  return {
    evaluate: () => send('Runtime.evaluate', { expression: '1' }, sessionId),
    close: () => ws.close(),
  };
}

/**
 * `n` timings of each way, run in interleaved blocks so both see the same machine, and the CPU
 * time this process spent per call of each way (`cpu`, µs): the client and both nodes run here,
 * so the difference between two ways is the work a hop adds, which the machine's load does not
 * stretch the way it stretches wall-clock times (PostgreSQL and Chromium are other processes,
 * the same for every way).
 */
async function interleaved(
  ways: Record<string, () => Promise<unknown>>,
  count: number,
): Promise<{ times: Record<string, number[]>; cpu: Record<string, number> }> {
  const times: Record<string, number[]> = {};
  const cpu: Record<string, number> = {};
  for (const name of Object.keys(ways)) {
    times[name] = [];
    cpu[name] = 0;
  }
  for (const run of Object.values(ways)) for (let i = 0; i < 100; i++) await run(); // warm-up (JIT)
  for (let done = 0; done < count; done += BLOCK) {
    for (const [name, run] of Object.entries(ways)) {
      const before = process.cpuUsage();
      for (let i = 0; i < BLOCK; i++) {
        const t = performance.now();
        await run();
        times[name]!.push(performance.now() - t);
      }
      const used = process.cpuUsage(before);
      cpu[name]! += (used.user + used.system) / BLOCK;
    }
  }
  for (const name of Object.keys(cpu)) cpu[name]! /= Math.ceil(count / BLOCK);
  return { times, cpu };
}

function line(what: string, xs: readonly number[]): string {
  return `  ${what.padEnd(34)} p50 ${ms(median(xs))}   p95 ${ms(percentile(xs, 95))}`;
}

const pg = await startPostgres();
const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-cluster-'));
const servers: TestServer[] = [];
const closers: (() => unknown)[] = [];
try {
  const key = join(dir, 'secret.key');
  writeFileSync(key, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  const node = async (name: string) => {
    const s = await testServer({
      dataDir: join(dir, name),
      secretKeyFile: key,
      logLevel: 'warn',
      cluster: { databaseUrl: pg.url, nodeName: name, leaseSeconds: 15 },
    });
    servers.push(s);
    return s;
  };
  const one = await node('node-1');
  const two = await node('node-2');
  const viaOne = client(one);
  const viaTwo = client(two);
  closers.push(viaOne.close, viaTwo.close);
  console.log(
    `cluster hop: PostgreSQL 15 and two nodes in one process, loopback; N=${n}; load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );

  const { id } = (await viaOne.call('POST', '/v1/start', { instance_type: 'browser' })) as {
    id: string;
  };
  closers.push(() => viaOne.call('POST', `/v1/instance/${id}/stop`).catch(() => {}));

  // (a) HTTP
  const bare = await bareProxy(one.url);
  closers.push(
    () => {
      bare.server.closeAllConnections();
      return new Promise((resolve) => bare.server.close(resolve));
    },
    () => bare.agent.close(),
  );
  const viaBare = client({ url: bare.url, apiKey: one.apiKey });
  closers.push(viaBare.close);
  const { times: http, cpu: httpCpu } = await interleaved(
    {
      direct: () => viaOne.call('GET', `/v1/instance/${id}`),
      forwarded: () => viaTwo.call('GET', `/v1/instance/${id}`),
      bare: () => viaBare.call('GET', `/v1/instance/${id}`),
    },
    n,
  );
  const added = (way: string) => ms(median(http[way]!) - median(http.direct!));
  console.log('(a) GET /v1/instance/{id}');
  console.log(line('on the owner', http.direct!));
  console.log(line('through the other node', http.forwarded!));
  console.log(line('through a bare proxy (the floor)', http.bare!));
  console.log(
    `  added per request (p50)            ${added('forwarded')} (goal ≤ +0.5 ms); bare proxy ${added('bare')}`,
  );
  const cpuAdded = (way: string) => `${(httpCpu[way]! - httpCpu.direct!).toFixed(0)} µs`;
  console.log(
    `  CPU per request (this process)     owner ${httpCpu.direct!.toFixed(0)} µs; hop +${cpuAdded('forwarded')}, bare proxy +${cpuAdded('bare')}`,
  );

  // (b) CDP
  const { cdp_url } = (await viaOne.call('GET', `/v1/instance/${id}/browser/cdp_url`)) as {
    cdp_url: string;
  };
  const direct = await cdp(cdp_url);
  const through = await cdp(cdp_url.replace(new URL(one.url).host, new URL(two.url).host));
  closers.push(direct.close, through.close);
  const { times: rt, cpu: rtCpu } = await interleaved(
    { direct: direct.evaluate, forwarded: through.evaluate },
    n,
  );
  console.log('(b) CDP Runtime.evaluate("1") round trip');
  console.log(line('cdp_url on the owner', rt.direct!));
  console.log(line('cdp_url through the other node', rt.forwarded!));
  console.log(
    `  added per round trip (p50)         ${ms(median(rt.forwarded!) - median(rt.direct!))} (goal ≤ +0.1 ms)`,
  );
  console.log(
    `  CPU per round trip (this process)  owner ${rtCpu.direct!.toFixed(0)} µs; hop +${(rtCpu.forwarded! - rtCpu.direct!).toFixed(0)} µs`,
  );

  // (c) starts
  const starts: Record<'two' | 'one', number[]> = { two: [], one: [] };
  const firstGets: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    for (const [name, at, other] of [
      ['two', viaTwo, viaOne],
      ['one', viaOne, viaTwo],
    ] as const) {
      const t = performance.now();
      const started = (await at.call('POST', '/v1/start', { instance_type: 'browser' })) as {
        id: string;
      };
      starts[name].push(performance.now() - t);
      const g = performance.now();
      await other.call('GET', `/v1/instance/${started.id}`);
      firstGets.push(performance.now() - g);
      await at.call('POST', `/v1/instance/${started.id}/stop`);
    }
  }
  console.log(`(c) POST /v1/start (browser), ${STARTS} each`);
  console.log(`  through node 2                     p50 ${ms(median(starts.two))}`);
  console.log(`  through node 1                     p50 ${ms(median(starts.one))}`);
  console.log(`  then GET through the other node    p50 ${ms(median(firstGets))}`);

  // (d) the cluster-wide list with ROWS rows
  const db = await Database.open({ url: pg.url });
  closers.push(() => db.close());
  const ghost = new PostgresInstanceStore(db, { node: 'bench-rows', run: 'bench' });
  const row = await ghost.get(id);
  if (!row) throw new Error(`no row for ${id}`);
  for (let i = 0; i < ROWS; i++) {
    await ghost.put({ ...row, id: `inst_bench${String(i).padStart(6, '0')}` });
  }
  const { count } = (await db.query<{ count: string }>('SELECT count(*) FROM instances')).rows[0]!;
  const { times: lists } = await interleaved(
    { list: () => viaTwo.call('GET', '/v1/instances') },
    LISTS,
  );
  console.log(`(d) GET /v1/instances on node 2, ${count} rows in the table`);
  console.log(`${line('list', lists.list!)}   (goal: p95 < 50 ms)`);
  await db.query(`DELETE FROM instances WHERE node = 'bench-rows'`);
} finally {
  for (const close of closers.reverse()) await close();
  for (const s of servers.reverse()) await s.close();
  pg.stop();
  rmSync(dir, { recursive: true, force: true });
}
