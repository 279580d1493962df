/**
 * A single server (no `--cluster`) at its own cap answers 429 `server_at_capacity` with a
 * Retry-After computed as a full cluster's is (src/server/instances/retry-after.ts): from its
 * instances' deadlines, not a constant. The MCP tool reads the same seconds in its error, on
 * `/mcp` and over the typed client (`burrow mcp` on stdio).
 */
import { describe, expect, it } from 'vitest';
import { clientBackend } from '../../../src/cli/mcp-backend.js';
import { Burrow } from '../../../src/client/index.js';
import { McpToolFailure } from '../../../src/server/mcp/backend.js';
import { useServer } from '../../helpers/use-server.js';

const server = useServer({ maxInstances: 1, warmPool: 0 }, { timeout: 60_000 });

async function refused() {
  const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
  expect(res.status).toBe(429);
  expect(res.headers.get('x-burrow-error')).toBe('server_at_capacity');
  const { detail } = (await res.json()) as { detail: string };
  const seconds = Number(res.headers.get('retry-after'));
  expect(detail).toContain(`retry in ${seconds} s`);
  return seconds;
}

describe('a full single server’s Retry-After', () => {
  it('is derived from its instances’ deadlines', async () => {
    // its deadline 36 s away
    const res = await server.api('/v1/start', {
      json: { instance_type: 'browser', timeout_hours: 0.01 },
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    const soon = await refused();
    expect(soon).toBeGreaterThanOrEqual(30);
    expect(soon).toBeLessThanOrEqual(37);
    // an hour away: longer than the bound, and nothing ended lately to go by
    expect(
      (await server.api(`/v1/instance/${id}/extend`, { json: { timeout_hours: 1 } })).status,
    ).toBe(200);
    expect(await refused()).toBe(300);
    // two minutes away
    await server.api(`/v1/instance/${id}/extend`, { json: { timeout_hours: 2 / 60 } });
    const later = await refused();
    expect(later).toBeGreaterThanOrEqual(110);
    expect(later).toBeLessThanOrEqual(121);
    // the MCP tool's error carries the same seconds
    const rpc = async (method: string, params: object, sid?: string) => {
      const r = await server.api('/mcp', {
        headers: {
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-03-26',
          ...(sid && { 'mcp-session-id': sid }),
        },
        json: { jsonrpc: '2.0', id: 1, method, params },
      });
      return {
        sid: r.headers.get('mcp-session-id'),
        body: (await r.json()) as { result: unknown },
      };
    };
    const { sid } = await rpc('initialize', {
      protocolVersion: '2025-03-26',
      capabilities: {},
      clientInfo: { name: 'retry-after-test', version: '1' },
    });
    const { body } = await rpc(
      'tools/call',
      { name: 'instance_start', arguments: { instance_type: 'browser' } },
      sid!,
    );
    const result = body.result as {
      isError?: boolean;
      structuredContent: { error: { code: string; status: number; retry_after_seconds: number } };
    };
    expect(result.isError).toBe(true);
    expect(result.structuredContent.error).toMatchObject({
      code: 'server_at_capacity',
      status: 429,
    });
    expect(result.structuredContent.error.retry_after_seconds).toBeGreaterThanOrEqual(110);
    expect(result.structuredContent.error.retry_after_seconds).toBeLessThanOrEqual(121);
    await server.api('/mcp', { method: 'DELETE', headers: { 'mcp-session-id': sid! } });
    // and so does `burrow mcp` on stdio, whose tools call the typed client
    const api = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
    try {
      const err = (await clientBackend(api)
        .start({ instance_type: 'browser' })
        .catch((e: unknown) => e)) as McpToolFailure;
      expect(err).toBeInstanceOf(McpToolFailure);
      expect(err).toMatchObject({ code: 'server_at_capacity', status: 429 });
      expect(err.retryAfterSeconds).toBeGreaterThanOrEqual(110);
      expect(err.retryAfterSeconds).toBeLessThanOrEqual(121);
    } finally {
      await api.close();
    }
  }, 60_000);
});
