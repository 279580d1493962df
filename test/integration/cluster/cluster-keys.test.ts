/**
 * Keys of projects and the client address across a hop, on real nodes of one cluster on one
 * real PostgreSQL (in this process, on loopback ports, as cluster-nodes.test.ts):
 *
 * - a key of project B can neither see, stop nor get the `cdp_url` of project A's instance, nor
 *   read or delete A's auth states, through either node: the 404 of an unknown id, same body;
 *   the admin key (the server's own) sees every project; a project key cannot manage keys; the
 *   MCP tools, which call the same handlers, are scoped alike;
 * - a key revoked through node 1 is refused by node 2 within a second; the keys table holds
 *   digests, never a key; `burrow keys create|list|revoke` against a real node; a key that
 *   cannot be looked up while the database is away gets a 503, not a 500;
 * - the per-client connection cap counts a forwarded request against the client the
 *   forwarding node saw (signed), and counts a client that forges the forwarding headers by its
 *   socket address. Clients take addresses of their own in 127.0.0.0/8 to tell them apart from
 *   the nodes (127.0.0.1).
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import type { Database } from '../../../src/server/cluster/database.js';
import { IdSigner } from '../../../src/server/cluster/ids.js';
import { ClientSigner } from '../../../src/server/cluster/forwarded-client.js';
import { otherClients, type OtherClients } from '../../helpers/other-clients.js';
import { testServer, type TestServer } from '../../helpers/server.js';
import { useCluster } from '../../helpers/use-cluster.js';

const cluster = useCluster(2, { prefix: 'burrow-keys-', database: true, timeout: 60_000 });
let db: Database;
let one: TestServer;
let two: TestServer;
/** Nodes with a per-client cap of 2, for the connection-cap cases. */
let three: TestServer;
let four: TestServer;
const node = (name: string, extra: { maxConnectionsPerClient?: number } = {}) =>
  cluster.node(name, extra);
let admin: Burrow;
let keyA = '';
let keyB = '';
/** Project A's instance (stopped by the end of its case). */
let instanceA = '';

beforeAll(async () => {
  [one, two] = cluster.nodes as [TestServer, TestServer];
  db = cluster.db;
  admin = new Burrow({ baseUrl: one.url, apiKey: one.apiKey, maxRetries: 0 });
  keyA = (await admin.keys.create({ project: 'alpha', name: 'a' })).key;
  keyB = (await admin.keys.create({ project: 'beta' })).key;
}, 60_000);

afterAll(async () => {
  await admin?.close();
});

/** `fetch` against `node` with `key`. */
function as(
  node: TestServer,
  key: string,
  path: string,
  init: { method?: string; json?: unknown } = {},
) {
  return node.api(path, {
    ...(init.method && { method: init.method }),
    ...(init.json !== undefined && { json: init.json }),
    headers: { 'x-api-key': key },
  });
}

/** A genuine id of `node`'s slot (the cluster's secret signs it) that no instance has. */
async function unknownIdOf(name: string): Promise<string> {
  const s = await db.query<{ secret: Buffer }>('SELECT secret FROM cluster_secret');
  const n = await db.query<{ slot: number }>('SELECT slot FROM nodes WHERE name = $1', [name]);
  return new IdSigner(s.rows[0]!.secret).mint(n.rows[0]!.slot);
}

/** Status, error code and body of an answer. */
async function answer(res: Response) {
  return { status: res.status, code: res.headers.get('x-burrow-error'), body: await res.text() };
}

describe('keys of projects', () => {
  it('keeps the keys as digests: no key in the table', async () => {
    const rows = await db.query<{ digest: Buffer; last4: string; project: string }>(
      'SELECT * FROM api_keys ORDER BY created_at',
    );
    const text = JSON.stringify(rows.rows);
    for (const key of [keyA, keyB]) {
      expect(text).not.toContain(key);
      expect(text).not.toContain(key.slice(4, 24));
      const digest = createHash('sha256').update(key).digest();
      const row = rows.rows.find((r) => r.digest.equals(digest));
      expect(row?.last4).toBe(key.slice(-4));
    }
    const listed = await admin.keys.list();
    expect(listed.map((k) => k.project)).toEqual(expect.arrayContaining(['alpha', 'beta']));
    expect(JSON.stringify(listed)).not.toContain(keyA);
    expect(Object.keys(listed[0]!).sort()).toEqual(
      ['created_at', 'id', 'last4', 'name', 'project', 'revoked_at'].sort(),
    );
  });

  it('shows another project’s instance to nobody but the admin: 404 as an unknown id, on both nodes', async () => {
    const started = await as(two, keyA, '/v1/start', { json: { instance_type: 'browser' } });
    expect(started.status).toBe(200);
    const { id } = (await started.json()) as { id: string };
    instanceA = id;
    try {
      // project A, through its own node and the other one
      for (const node of [one, two]) {
        expect((await as(node, keyA, `/v1/instance/${id}`)).status).toBe(200);
        const cdp = await as(node, keyA, `/v1/instance/${id}/browser/cdp_url`);
        expect(cdp.status).toBe(200);
        const list = (await (await as(node, keyA, '/v1/instances')).json()) as { id: string }[];
        expect(list.map((i) => i.id)).toContain(id);
      }
      // the 404 of an id no instance has, from the owner node, as the admin asks it
      const unknown = await unknownIdOf('node-2');
      const reference = await answer(await as(two, two.apiKey, `/v1/instance/${unknown}`));
      expect(reference.status).toBe(404);
      const expected = (path: string) => ({
        ...reference,
        body: reference.body.replace(unknown, path),
      });
      for (const node of [one, two]) {
        for (const [method, path] of [
          ['GET', `/v1/instance/${id}`],
          ['POST', `/v1/instance/${id}/stop`],
          ['GET', `/v1/instance/${id}/browser/cdp_url`],
          ['POST', `/v1/instance/${id}/screenshot`],
        ] as const) {
          const got = await answer(
            await as(node, keyB, path, method === 'POST' ? { json: {} } : {}),
          );
          expect(got, `${method} ${path} on ${node.url}`).toEqual(expected(id));
        }
        const list = (await (await as(node, keyB, '/v1/instances')).json()) as { id: string }[];
        expect(list.map((i) => i.id)).not.toContain(id);
        // the admin sees every project's instances
        const all = (await (await as(node, node.apiKey, '/v1/instances')).json()) as {
          id: string;
        }[];
        expect(all.map((i) => i.id)).toContain(id);
      }
      expect((await as(one, one.apiKey, `/v1/instance/${id}`)).status).toBe(200);
      // still running: B's stop did nothing
      const row = (await (await as(one, keyA, `/v1/instance/${id}`)).json()) as { status: string };
      expect(row.status).toBe('running');
    } finally {
      await as(one, keyA, `/v1/instance/${id}/stop`, { json: {} });
    }
  }, 120_000);

  it('keeps auth states to their project; the same name in two projects is two states', async () => {
    const state = (value: string) => ({
      cookies: [{ name: 'sid', value, domain: '127.0.0.1', path: '/' }],
      origins: [],
    });
    const saved = await as(one, keyA, '/v1/auth_states/import?name=login', {
      json: state('alpha-cookie'),
    });
    expect(saved.status).toBe(200);
    const a = ((await saved.json()) as { auth_state_id: string }).auth_state_id;
    const other = await as(two, keyB, '/v1/auth_states/import?name=login', {
      json: state('beta-cookie'),
    });
    const b = ((await other.json()) as { auth_state_id: string }).auth_state_id;
    expect(b).not.toBe(a); // not A's state overwritten
    const unknown = 'auth_0123456789abcdef';
    for (const node of [one, two]) {
      const reference = await answer(
        await as(node, node.apiKey, `/v1/auth_states/${unknown}/storage_state`),
      );
      expect(reference.status).toBe(404);
      const read = await answer(await as(node, keyB, `/v1/auth_states/${a}/storage_state`));
      expect(read).toEqual({ ...reference, body: reference.body.replace(unknown, a) });
      const del = await answer(await as(node, keyB, `/v1/auth_states/${a}/delete`, { json: {} }));
      expect(del.status).toBe(404);
      expect(del.code).toBe('auth_state_not_found');
      const listB = (await (await as(node, keyB, '/v1/auth_states')).json()) as { id: string }[];
      expect(listB.map((s) => s.id)).toEqual([b]);
      const all = (await (await as(node, node.apiKey, '/v1/auth_states')).json()) as {
        id: string;
      }[];
      expect(all.map((s) => s.id)).toEqual(expect.arrayContaining([a, b]));
    }
    // A's state is intact and its own
    const mine = await as(two, keyA, `/v1/auth_states/${a}/storage_state`);
    expect(((await mine.json()) as { cookies: { value: string }[] }).cookies[0]!.value).toBe(
      'alpha-cookie',
    );
  });

  it('scopes the MCP tools alike: another project’s instance is not listed, not found', async () => {
    expect(instanceA).not.toBe('');
    const mcp = async (key: string, method: string, params: object, sid?: string) => {
      const res = await one.api('/mcp', {
        headers: {
          'x-api-key': key,
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-03-26',
          ...(sid && { 'mcp-session-id': sid }),
        },
        json: { jsonrpc: '2.0', id: 1, method, params },
      });
      expect(res.status).toBe(200);
      return {
        sid: res.headers.get('mcp-session-id'),
        body: (await res.json()) as { result: unknown },
      };
    };
    const tool = async (key: string, name: string, args: object = {}) => {
      const { sid } = await mcp(key, 'initialize', {
        protocolVersion: '2025-03-26',
        capabilities: {},
        clientInfo: { name: 'keys-test', version: '1' },
      });
      const { body } = await mcp(key, 'tools/call', { name, arguments: args }, sid!);
      return body.result as { isError?: boolean; content: { text: string }[] };
    };
    const all = await tool(one.apiKey, 'instance_list');
    expect(JSON.stringify(all)).toContain(instanceA);
    const mineA = await tool(keyA, 'instance_list');
    expect(JSON.stringify(mineA)).toContain(instanceA);
    const listB = await tool(keyB, 'instance_list');
    expect(listB.isError).not.toBe(true);
    expect(JSON.stringify(listB)).not.toContain(instanceA);
    const stopB = await tool(keyB, 'instance_current_url', { instance_id: instanceA });
    expect(stopB.isError).toBe(true);
    expect(stopB.content[0]!.text).toContain(`Instance ${instanceA} not found`);
  });

  it('a project’s MCP session that ends with its event stream stops the instance it started', async () => {
    const headers = (sid?: string) => ({
      'x-api-key': keyA,
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-03-26',
      ...(sid && { 'mcp-session-id': sid }),
    });
    const rpc = (method: string, params: object, sid?: string) =>
      one.api('/mcp', {
        headers: headers(sid),
        json: { jsonrpc: '2.0', id: 1, method, params },
      });
    const init = await rpc('initialize', {
      protocolVersion: '2025-03-26',
      capabilities: {},
      clientInfo: { name: 'keys-test', version: '1' },
    });
    const sid = init.headers.get('mcp-session-id')!;
    // the event stream an SDK client keeps open, then drops (its close() sends no DELETE)
    const stream = new AbortController();
    const events = await fetch(`${one.url}/mcp`, {
      headers: { ...headers(sid), accept: 'text/event-stream' },
      signal: stream.signal,
    });
    expect(events.status).toBe(200);
    const started = await rpc(
      'tools/call',
      { name: 'instance_start', arguments: { instance_type: 'ubuntu' } },
      sid,
    );
    const text = JSON.stringify(await started.json());
    const id = /inst_[0-9a-z]+/.exec(text)?.[0];
    expect(id, text).toBeDefined();
    stream.abort();
    // the stream's grace (5 s) runs out outside any request of the client: the session's stop
    // must still run as project alpha's
    await expect
      .poll(async () => (await admin.instances.get(id!)).status, { timeout: 30_000 })
      .toBe('terminated');
  }, 60_000);

  it('leaves keys, managing extensions and draining a node to the admin key', async () => {
    for (const [method, path, json] of [
      ['POST', '/v1/node/drain', undefined],
      ['POST', '/v1/keys', { project: 'alpha' }],
      ['GET', '/v1/keys', undefined],
      ['DELETE', '/v1/keys/key_0123456789abcdef', undefined],
      ['GET', '/v1/extensions', undefined],
    ] as const) {
      const got = await as(one, keyA, path, { method, json });
      expect(got.status, `${method} ${path}`).toBe(403);
      expect(got.headers.get('x-burrow-error')).toBe('admin_key_required');
    }
    // profiles are the project's own (cluster-stores.test.ts): none yet
    const profiles = await as(one, keyA, '/v1/profiles');
    expect([profiles.status, await profiles.json()]).toEqual([200, []]);
    // the drain was refused: the node is still ready
    expect((await fetch(`${one.url}/readyz`)).status).toBe(200);
    expect((await as(one, 'bkp_' + 'x'.repeat(43), '/v1/instances')).status).toBe(401);
    const missing = await as(one, one.apiKey, '/v1/keys/key_0123456789abcdef', {
      method: 'DELETE',
    });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-burrow-error')).toBe('key_not_found');
  });

  it('refuses a key revoked through node 1 on node 2 within a second', async () => {
    const { id, key } = await admin.keys.create({ project: 'gamma' });
    // node 2 has checked it (and remembers it)
    expect((await as(two, key, '/v1/instances')).status).toBe(200);
    expect((await as(two, key, '/v1/instances')).status).toBe(200);
    await admin.keys.revoke(id);
    const since = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - since < 1000) {
      status = (await as(two, key, '/v1/instances')).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(status).toBe(401);
    expect((await as(one, key, '/v1/instances')).status).toBe(401);
    const listed = (await admin.keys.list()).find((k) => k.id === id);
    expect(listed?.revoked_at).toEqual(expect.any(String));
  });

  it('burrow keys create, list and revoke against a real node', async () => {
    const run = promisify(execFile);
    const cli = (...args: string[]) =>
      run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'keys', ...args], {
        cwd: resolve(import.meta.dirname, '../../..'),
        env: { ...process.env, BURROW_BASE_URL: one.url, BURROW_API_KEY: one.apiKey },
      });
    const created = await cli('create', '--project', 'cli', '--name', 'from the CLI');
    const key = created.stdout.trim();
    expect(key).toMatch(/^bkp_[A-Za-z0-9_-]{43}$/);
    expect(created.stderr).toContain('project cli');
    expect((await as(two, key, '/v1/instances')).status).toBe(200);
    const listed = JSON.parse((await cli('list', '--json')).stdout) as {
      id: string;
      project: string;
      name: string;
      last4: string;
    }[];
    const mine = listed.find((k) => k.project === 'cli')!;
    expect(mine).toMatchObject({ name: 'from the CLI', last4: key.slice(-4) });
    const table = (await cli('list')).stdout;
    expect(table).toContain(mine.id);
    expect(table).not.toContain(key);
    expect((await cli('revoke', mine.id)).stdout).toContain(`revoked key ${mine.id}`);
    expect((await as(one, key, '/v1/instances')).status).toBe(401);
  }, 60_000);

  it('a server without --cluster says keys need cluster mode', async () => {
    const single = await testServer();
    try {
      const res = await single.api('/v1/keys', { json: { project: 'alpha' } });
      expect(res.status).toBe(501);
      expect(res.headers.get('x-burrow-error')).toBe('keys_need_cluster');
      expect((await single.api('/v1/keys')).status).toBe(501);
    } finally {
      await single.close();
    }
  });
});

/** One keep-alive connection from `localAddress` to `node`, held until `close`. */
function connection(node: TestServer, localAddress: string) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1, localAddress });
  const send = (path: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; code: string | undefined; body: string }>((ok, fail) => {
      const req = httpRequest(
        new URL(path, node.url),
        { agent, headers: { 'x-api-key': node.apiKey, ...headers } },
        (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () =>
            ok({
              status: res.statusCode!,
              code: res.headers['x-burrow-error'] as string | undefined,
              body,
            }),
          );
        },
      );
      req.on('error', fail);
      req.end();
    });
  return { send, close: () => agent.destroy() };
}

describe('the per-client connection cap across a hop', () => {
  // clients other than this host (every loopback address is this host, one client, as the nodes
  // are to each other)
  let clients: OtherClients;
  let [c11, c12, c13] = ['', '', ''];
  afterAll(() => clients?.remove());
  // two nodes of their own, joined only now: before, placement could send a start of the cases
  // above to a node whose small cap the test's own connections fill
  beforeAll(async () => {
    clients = otherClients(3);
    [c11, c12, c13] = clients.addresses as [string, string, string];
    three = await node('node-3', { maxConnectionsPerClient: 2 });
    four = await node('node-4', { maxConnectionsPerClient: 2 });
  }, 60_000);

  it('counts a request forwarded by another node against the real client', async () => {
    const id = await unknownIdOf('node-4'); // node 3 forwards it to node 4
    const held = [connection(four, c11), connection(four, c11)];
    const nodes = [connection(four, '127.0.0.1'), connection(four, '127.0.0.1')];
    const via = [connection(three, c11), connection(three, c12)];
    try {
      // the client c11 and the nodes' own address each hold node 4's cap
      for (const c of [...held, ...nodes]) expect((await c.send('/v1/instances')).status).toBe(200);
      // c11 through node 3: node 4 counts it as c11, which is at its cap
      const over = await via[0]!.send(`/v1/instance/${id}`);
      expect(over.status).toBe(429);
      expect(over.code).toBe('too_many_connections');
      expect(over.body).toContain(c11);
      // c12 through node 3: counted as c12, not as the node's address (which is at its cap too)
      const other = await via[1]!.send(`/v1/instance/${id}`);
      expect(other).toMatchObject({ status: 404, code: 'instance_not_found' });
    } finally {
      for (const c of [...held, ...nodes, ...via]) c.close();
    }
  });

  it('counts a client that forges the forwarding headers by its socket address', async () => {
    const stranger = new ClientSigner(randomBytes(32)); // another cluster's, or a guess
    const conns = [0, 1, 2].map(() => connection(four, c13));
    try {
      const forged = (i: number): Record<string, string> => ({
        'x-forwarded-for': `10.0.0.${i}`,
        'x-burrow-forwarded-by': 'node-3',
        'x-burrow-client':
          i === 0
            ? `10.0.1.${i} ${Date.now()} ${'0'.repeat(64)}`
            : stranger.sign(`10.0.1.${i}`, 'GET', '/v1/instances'),
      });
      expect((await conns[0]!.send('/v1/instances', forged(0))).status).toBe(200);
      expect((await conns[1]!.send('/v1/instances', forged(1))).status).toBe(200);
      // a third connection of the same socket address is past the cap, whatever it claims
      const third = await conns[2]!.send('/v1/instances', forged(2));
      expect(third.status).toBe(429);
      expect(third.body).toContain(c13);
    } finally {
      for (const c of conns) c.close();
    }
  });
});

describe('keys while the database does not answer', () => {
  // last: after the database's restart the nodes no longer hear NOTIFY
  it('a key this node cannot look up gets a 503 to retry, not a 500', async () => {
    const unchecked = `bkp_${randomBytes(32).toString('base64url')}`;
    cluster.pg.pause();
    try {
      const res = await as(one, unchecked, '/v1/instances');
      expect(res.status).toBe(503);
      expect(res.headers.get('x-burrow-error')).toBe('cluster_database_unavailable');
      expect(res.headers.get('retry-after')).toBe('5');
    } finally {
      cluster.pg.resume();
    }
  });
});
