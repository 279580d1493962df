/**
 * Starts in a cluster of three real nodes on one real PostgreSQL (in this process, on loopback
 * ports), beyond `POST /v1/start` (cluster-placement.test.ts):
 *
 * - the MCP tool `instance_start` on node 1 is placed as `POST /v1/start` is: it claims node 2's
 *   warm browser first, and once node 1 is full its cold start lands on another node; the
 *   session's browser tools then work on that instance through node 1, and stop it;
 * - a node drained through the API places a start it is sent right after on another node
 *   (200, never its own 503 `node_draining`);
 * - a full cluster refuses starts over HTTP (429 `cluster_at_capacity` with Retry-After) and to
 *   the MCP tool (a tool error with the code, status and seconds), and every refusal is counted:
 *   KEDA's query (scripts/deploy.ts), run on the database, reads live + refused.
 *
 * Node 1 takes 1 instance, node 2 takes 2 and keeps one browser warm, node 3 takes 3. The cases
 * run in order, each on the instances the earlier ones left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCALE_QUERY } from '../../../scripts/deploy.js';
import type { Database } from '../../../src/server/cluster/database.js';
import { eventually, type TestServer } from '../../helpers/server.js';
import { useCluster } from '../../helpers/use-cluster.js';

const cluster = useCluster(3, {
  prefix: 'burrow-starts-',
  database: true,
  timeout: 90_000,
  // the pools placement sees are the ones given here, whatever BURROW_WARM_POOL says
  options: (_, i) =>
    [{ maxInstances: 1 }, { maxInstances: 2, warmPool: { browser: 1 } }, { maxInstances: 3 }][i]!,
});
let db: Database;
let one: TestServer;
let two: TestServer;
let three: TestServer;

/** A browser start the warm pool cannot serve (an identity), so it goes by load. */
const COLD = { instance_type: 'browser', locale: 'de-DE' } as const;

async function start(via: TestServer, body: object, headers: Record<string, string> = {}) {
  const res = await via.api('/v1/start', { json: body, headers });
  const json = (await res.json()) as { id?: string; detail?: string };
  return { status: res.status, headers: res.headers, id: json.id ?? '', json };
}

interface ToolResult {
  isError?: boolean;
  content: { type: string; text?: string }[];
  structuredContent?: { error?: { code: string; status?: number; retry_after_seconds?: number } };
}

/** An MCP session on `node` (JSON answers, as cluster-keys.test.ts speaks it). */
async function mcpSession(node: TestServer) {
  let sid: string | null = null;
  let seq = 0;
  const rpc = async (method: string, params: object) => {
    const res = await node.api('/mcp', {
      headers: {
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-03-26',
        ...(sid && { 'mcp-session-id': sid }),
      },
      json: { jsonrpc: '2.0', id: ++seq, method, params },
    });
    expect(res.status).toBe(200);
    sid ??= res.headers.get('mcp-session-id');
    return ((await res.json()) as { result: unknown }).result;
  };
  await rpc('initialize', {
    protocolVersion: '2025-03-26',
    capabilities: {},
    clientInfo: { name: 'cluster-starts-test', version: '1' },
  });
  return {
    tool: async (name: string, args: object = {}) =>
      (await rpc('tools/call', { name, arguments: args })) as ToolResult,
    close: async () => {
      await node.api('/mcp', { method: 'DELETE', headers: { 'mcp-session-id': sid! } });
    },
  };
}

/** The instance a successful `instance_start` answered (its JSON is the second text). */
function started(r: ToolResult): { id: string } {
  expect(r.isError, JSON.stringify(r)).not.toBe(true);
  return JSON.parse(r.content[1]!.text!) as { id: string };
}

const demand = async () =>
  Number((await db.query<{ n: string }>(`${SCALE_QUERY} AS n`)).rows[0]!.n);

/** Time for every node to read the nodes again after a notification. */
const settle = () => new Promise((r) => setTimeout(r, 1000));

let session: Awaited<ReturnType<typeof mcpSession>>;

beforeAll(async () => {
  [one, two, three] = cluster.nodes as [TestServer, TestServer, TestServer];
  db = cluster.db;
  session = await mcpSession(one);
}, 90_000);

afterAll(async () => {
  await session?.close().catch(() => {});
});

describe('starts in a cluster beyond POST /v1/start', () => {
  it('places the MCP tool’s start: node 2’s warm browser first', async () => {
    await two.warmPool.ready();
    await eventually(
      async () =>
        (
          await db.query<{ n: number }>(
            `SELECT (warm->>'browser')::int AS n FROM nodes WHERE name = 'node-2'`,
          )
        ).rows[0]?.n === 1,
      'node 2 to advertise its warm browser',
    );
    await settle();
    const pooled = two.warmPool.ids();
    expect(pooled).toHaveLength(1);
    const inst = started(await session.tool('instance_start', { instance_type: 'browser' }));
    expect(inst.id).toBe(pooled[0]); // the very instance that waited in node 2's pool
  }, 60_000);

  it('places it on another node once node 1 is full, and its tools work through node 1', async () => {
    // a forwarded start is started where it arrives: this fills node 1
    const local = await start(one, COLD, { 'x-burrow-forwarded-by': 'test' });
    expect(local.status, JSON.stringify(local.json)).toBe(200);
    expect(local.id).toMatch(/^inst_c001/);
    await settle();
    // node 3 (0 of 3) is less loaded than node 2 (1 of 2)
    const inst = started(await session.tool('instance_start', COLD));
    expect(inst.id).toMatch(/^inst_c003/);
    const owner = three;
    expect((await owner.api(`/v1/instance/${inst.id}`)).status).toBe(200);
    // the browser tools reach it through node 1 (its API and its cdp_url, forwarded)
    const page = 'data:text/html,<title>placed</title><h1>far away</h1>';
    const nav = await session.tool('browser_navigate', { url: page, instance_id: inst.id });
    expect(nav.isError, JSON.stringify(nav)).not.toBe(true);
    expect(JSON.stringify(nav.content)).toContain('far away');
    const url = await session.tool('instance_current_url', { instance_id: inst.id });
    expect(url.content[0]!.text).toContain('data:text/html');
    const stopped = await session.tool('instance_stop', { instance_id: inst.id });
    expect(stopped.isError, JSON.stringify(stopped)).not.toBe(true);
    const row = (await (await owner.api(`/v1/instance/${inst.id}`)).json()) as { status: string };
    expect(row.status).toBe('terminated');
  }, 90_000);

  it('a node drained through the API places a start sent to it at once on another node', async () => {
    // an instance that keeps node 3 running while it drains
    const kept = await start(three, COLD, { 'x-burrow-forwarded-by': 'test' });
    expect(kept.id).toMatch(/^inst_c003/);
    await settle();
    // node 3 (1 of 3) is less loaded than node 2 (1 of 2): up, it would take the start itself
    const drain = await three.api('/v1/node/drain', { method: 'POST' });
    expect(drain.status).toBe(202);
    // at once: before node 3's draining row is read back from the database
    const placed = await start(three, COLD);
    expect(placed.status, JSON.stringify(placed.json)).toBe(200);
    // node 1 is full: node 2 is the only other one with room
    expect(placed.id).toMatch(/^inst_c002/);
    // its last instance stopped, node 3 closes
    expect((await three.api(`/v1/instance/${kept.id}/stop`, { method: 'POST' })).status).toBe(200);
    await three.drained;
  }, 60_000);

  it('counts the starts a full cluster refuses, over HTTP and MCP: KEDA reads live + refused', async () => {
    await settle();
    const before = await demand();
    expect(before).toBe(3); // node 1's one, node 2's two; nothing refused yet
    const refusals = 3;
    for (let i = 0; i < refusals; i++) {
      const full = await start(i % 2 === 0 ? one : two, COLD);
      expect(full.status, JSON.stringify(full.json)).toBe(429);
      expect(full.headers.get('x-burrow-error')).toBe('cluster_at_capacity');
      expect(Number(full.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    // the tool says the same, with the seconds to wait
    const refused = await session.tool('instance_start', COLD);
    expect(refused.isError).toBe(true);
    const error = refused.structuredContent?.error;
    expect(error?.code).toBe('cluster_at_capacity');
    expect(error?.status).toBe(429);
    expect(error?.retry_after_seconds).toBeGreaterThanOrEqual(1);
    expect(refused.content[0]!.text).toContain(`retry after ${error?.retry_after_seconds} s`);
    // each refusal counted once, by the node that answered
    await eventually(async () => (await demand()) === 3 + refusals + 1, 'the refusals counted');
    const rows = await db.query<{ node: string; status: number; refused: number }>(
      'SELECT node, status, refused FROM start_refusals ORDER BY node',
    );
    expect(rows.rows.every((r) => r.status === 429)).toBe(true);
    expect(rows.rows.reduce((n, r) => n + r.refused, 0)).toBe(refusals + 1);
    expect(rows.rows.find((r) => r.node === 'node-2')?.refused).toBe(1);
  }, 60_000);

  it('stops the instances an MCP session placed elsewhere when it ends, and when its node closes', async () => {
    const status = async (id: string) =>
      ((await (await two.api(`/v1/instance/${id}`)).json()) as { status: string }).status;
    const placed = (await (await two.api('/v1/instances')).json()) as {
      id: string;
      status: string;
    }[];
    const warm = placed.filter((i) => i.status === 'running' && i.id.startsWith('inst_c002'));
    expect(warm).toHaveLength(2);
    await session.close(); // DELETE /mcp: its warm-claimed instance on node 2 stops
    await eventually(
      async () => (await Promise.all(warm.map((i) => status(i.id)))).includes('terminated'),
      'the session’s instance on node 2 to stop',
    );
    await settle();
    // a session of its own, its instance on node 2, then node 1 closes
    const other = await mcpSession(one);
    const inst = started(await other.tool('instance_start', COLD));
    expect(inst.id).toMatch(/^inst_c002/);
    await one.close();
    expect(await status(inst.id)).toBe('terminated');
  }, 60_000);
});
