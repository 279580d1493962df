/**
 * Real requests against the real server carry their catalogue code in `x-burrow-error`, over
 * Fastify's reply and over a raw socket alike, and the typed client exposes it as `serverCode`.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow, NotFoundError } from '../../src/client/index.js';
import { SERVER_ERRORS } from '../../src/server/errors.js';
import { testServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => {
  await server?.close();
});

/** Status, headers (lower-cased names) and parsed body of a raw exchange on a new connection. */
function raw(
  request: string,
): Promise<{ status: number; headers: Map<string, string>; body: unknown }> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(request));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', body = ''] = Buffer.concat(chunks).toString('latin1').split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = new Map(
        lines.map((l) => [
          l.slice(0, l.indexOf(':')).toLowerCase(),
          l.slice(l.indexOf(':') + 1).trim(),
        ]),
      );
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headers,
        body: body && JSON.parse(body),
      });
    });
    setTimeout(() => socket.destroy(), 5_000).unref();
  });
}

async function expectError(res: Response, status: number, code: string, detail?: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('x-burrow-error')).toBe(code);
  expect(code in SERVER_ERRORS).toBe(true);
  const body = (await res.json()) as { detail: unknown };
  expect(Object.keys(body)).toEqual(['detail']);
  if (detail !== undefined) expect(body.detail).toBe(detail);
}

describe('x-burrow-error', () => {
  it('unknown instance → 404 instance_not_found', async () => {
    await expectError(
      await server.api('/v1/instance/inst_nope'),
      404,
      'instance_not_found',
      'Instance inst_nope not found',
    );
  });

  it('missing or wrong API key → 401 unauthorized', async () => {
    await expectError(await fetch(`${server.url}/v1/instances`), 401, 'unauthorized');
    const wrong = await server.api('/v1/instances', { headers: { 'x-api-key': 'wrong-key-123' } });
    await expectError(wrong, 401, 'unauthorized');
  });

  it('unknown route → 404 not_found', async () => {
    await expectError(await server.api('/v1/nothing-here'), 404, 'not_found', 'Not Found');
  });

  it('windows → 400 instance_type_unavailable', async () => {
    await expectError(
      await server.api('/v1/start', { json: { instance_type: 'windows' } }),
      400,
      'instance_type_unavailable',
      'windows instances are not available on this server',
    );
  });

  it('errors raised before routing have the shape and the header too', async () => {
    await expectError(await server.api('/v1/instance/%E0%A4%A'), 400, 'bad_url');
    await expectError(await server.api(`/v1/instance/${'a'.repeat(101)}`), 414, 'uri_too_long');
  });

  it('CONNECT → 405 method_not_allowed, from the raw socket', async () => {
    const res = await raw('CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n');
    expect(res.status).toBe(405);
    expect(res.headers.get('x-burrow-error')).toBe('method_not_allowed');
    expect(res.headers.get('allow')).toMatch(/GET/);
    expect(res.body).toEqual({ detail: 'Method CONNECT is not allowed' });
  });

  it('a WebSocket upgrade for an unknown instance → 401 token_invalid (no key: ids are not told)', async () => {
    const res = await raw(
      [
        'GET /cdp/inst_nope/devtools/browser/x HTTP/1.1',
        'Host: 127.0.0.1',
        'Upgrade: websocket',
        'Connection: Upgrade',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
        'Sec-WebSocket-Version: 13',
        '',
        '',
      ].join('\r\n'),
    );
    expect(res.status).toBe(401);
    expect(res.headers.get('x-burrow-error')).toBe('token_invalid');
    expect(res.body).toEqual({ detail: 'Invalid or expired CDP token' });
  });

  it('the typed client exposes the code as serverCode', async () => {
    await using client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
    const err: unknown = await client.instances.get('inst_nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({ code: 'not_found', serverCode: 'instance_not_found' });
  });
});
