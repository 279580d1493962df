/**
 * MCP sessions are a bounded resource: `initialize` past the cap answers 429 with a JSON-RPC error
 * that says so, ending a session frees its place, and a session that holds no instance ends after
 * a short idle time. Real HTTP POSTs to `/mcp` on a real server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, testServer, type TestServer } from '../../helpers/server.js';

let server: TestServer;

beforeAll(async () => {
  process.env.BURROW_MCP_MAX_SESSIONS = '5';
  process.env.BURROW_MCP_IDLE_SECONDS = '2';
  try {
    server = await testServer();
  } finally {
    delete process.env.BURROW_MCP_MAX_SESSIONS;
    delete process.env.BURROW_MCP_IDLE_SECONDS;
  }
}, 120_000);

afterAll(async () => {
  await server?.close();
});

const MCP_HEADERS = { accept: 'application/json, text/event-stream' };

const initialize = () =>
  server.api('/mcp', {
    headers: MCP_HEADERS,
    json: {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-03-26',
        capabilities: {},
        clientInfo: { name: 'dos-test', version: '1' },
      },
    },
  });

const ping = (sid: string) =>
  server.api('/mcp', {
    headers: { ...MCP_HEADERS, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-03-26' },
    json: { jsonrpc: '2.0', id: 2, method: 'ping' },
  });

describe('MCP sessions', () => {
  it('past the cap initialize answers 429 with a clear JSON-RPC error; DELETE frees a place', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await initialize();
      expect(res.status).toBe(200);
      ids.push(res.headers.get('mcp-session-id')!);
    }
    expect(new Set(ids).size).toBe(5);

    const over = await initialize();
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toMatch(/^\d+$/);
    const body = (await over.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/Too many MCP sessions \(limit 5\)/);
    // the sessions already open keep working
    expect((await ping(ids[0]!)).status).toBe(200);

    const del = await server.api('/mcp', {
      method: 'DELETE',
      headers: { ...MCP_HEADERS, 'mcp-session-id': ids[1]!, 'mcp-protocol-version': '2025-03-26' },
    });
    expect(del.status).toBe(200);
    const again = await initialize();
    expect(again.status).toBe(200);
  });

  it('a session that holds no instance ends after its idle time and frees its place', async () => {
    const res = await initialize();
    // whatever the first test left, every session it opened ends within the idle time
    await eventually(async () => (await initialize()).status === 200, 'a free place', 10_000);
    const sid = res.headers.get('mcp-session-id');
    if (sid) {
      await eventually(async () => (await ping(sid)).status === 404, 'the session ended', 10_000);
    }
    // many more sessions than the cap, over time, never pile up
    await new Promise((r) => setTimeout(r, 3_500));
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 5; j++) expect((await initialize()).status).toBe(200);
      await new Promise((r) => setTimeout(r, 3_500));
    }
  }, 60_000);
});
