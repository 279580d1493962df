/**
 * Caps per project under the node's (issue 35), on a cluster node (one, in this process, on a
 * real PostgreSQL) with two project keys:
 *
 * - `/mcp`: with room for 4 sessions, 2 per project, project alpha's key cannot take the node's
 *   every place: its third `initialize` answers 429 saying so, while project beta still opens
 *   its own; at the node's cap everyone is refused; a DELETE frees a place;
 * - auth states: 2 per project: alpha's third answers 507 and is not written, beta still saves
 *   its own, a delete of alpha's makes room.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { testServer, type TestServer } from '../../helpers/server.js';

let pg: TestPostgres;
let dir: string;
let node: TestServer;
let keyA = '';
let keyB = '';

beforeAll(async () => {
  pg = await startPostgres();
  dir = mkdtempSync(join(tmpdir(), 'burrow-mcp-projects-'));
  const secret = join(dir, 'secret.key');
  writeFileSync(secret, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  node = await testServer({
    dataDir: join(dir, 'node-1'),
    secretKeyFile: secret,
    warmPool: 0,
    mcpMaxSessions: 4,
    mcpMaxSessionsPerProject: 2,
    maxAuthStatesPerProject: 2,
    cluster: { databaseUrl: pg.url, nodeName: 'node-1', leaseSeconds: 5 },
  });
  const admin = new Burrow({ baseUrl: node.url, apiKey: node.apiKey, maxRetries: 0 });
  keyA = (await admin.keys.create({ project: 'alpha' })).key;
  keyB = (await admin.keys.create({ project: 'beta' })).key;
  await admin.close();
}, 60_000);

afterAll(async () => {
  await node?.close();
  pg?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const MCP_HEADERS = { accept: 'application/json, text/event-stream' };

const initialize = (key: string) =>
  node.api('/mcp', {
    headers: { ...MCP_HEADERS, 'x-api-key': key },
    json: {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-03-26',
        capabilities: {},
        clientInfo: { name: 'projects-test', version: '1' },
      },
    },
  });

/** The JSON-RPC error message of a refused `initialize`. */
const refusal = async (res: Response) => {
  expect(res.status).toBe(429);
  return ((await res.json()) as { error: { message: string } }).error.message;
};

describe('MCP sessions per project', () => {
  it('one project cannot take the node’s every place; another still opens its own', async () => {
    const a1 = await initialize(keyA);
    const a2 = await initialize(keyA);
    expect([a1.status, a2.status]).toEqual([200, 200]);
    expect(await refusal(await initialize(keyA))).toBe(
      'Too many MCP sessions of this project (limit 2); end one with DELETE /mcp or retry later',
    );
    // the node still has room, and beta takes it
    expect((await initialize(keyB)).status).toBe(200);
    expect((await initialize(keyB)).status).toBe(200);
    // the node is full: the admin too is refused, by the node's cap
    expect(await refusal(await initialize(node.apiKey))).toBe(
      'Too many MCP sessions (limit 4); end one with DELETE /mcp or retry later',
    );
    // one of alpha's ends: alpha has its place back
    const del = await node.api('/mcp', {
      method: 'DELETE',
      headers: {
        ...MCP_HEADERS,
        'x-api-key': keyA,
        'mcp-session-id': a1.headers.get('mcp-session-id')!,
        'mcp-protocol-version': '2025-03-26',
      },
    });
    expect(del.status).toBe(200);
    expect((await initialize(keyA)).status).toBe(200);
  }, 60_000);
});

describe('auth states per project', () => {
  const state = { cookies: [], origins: [] };
  const save = (key: string, name: string) =>
    node.api(`/v1/auth_states/import?name=${name}`, { json: state, headers: { 'x-api-key': key } });
  const listed = async (key: string) =>
    (
      (await (await node.api('/v1/auth_states', { headers: { 'x-api-key': key } })).json()) as {
        id: string;
      }[]
    ).map((s) => s.id);

  it('one project cannot fill the store every project shares', async () => {
    const first = (await (await save(keyA, 'a1')).json()) as { auth_state_id: string };
    expect((await save(keyA, 'a2')).status).toBe(200);
    const over = await save(keyA, 'a3');
    expect(over.status).toBe(507);
    expect(over.headers.get('x-burrow-error')).toBe('store_full');
    expect(await over.json()).toEqual({
      detail:
        'No room for an auth state: the project keeps 2 auth states, its cap is 2; delete some to make room',
    });
    expect(await listed(keyA)).toHaveLength(2);
    // replacing one of its own by name adds none
    expect((await save(keyA, 'a2')).status).toBe(200);
    // another project still has its own room
    expect((await save(keyB, 'b1')).status).toBe(200);
    expect((await save(keyB, 'b2')).status).toBe(200);
    const del = await node.api(`/v1/auth_states/${first.auth_state_id}/delete`, {
      method: 'POST',
      headers: { 'x-api-key': keyA },
    });
    expect(del.status).toBe(200);
    expect((await save(keyA, 'a3')).status).toBe(200);
  }, 60_000);
});
