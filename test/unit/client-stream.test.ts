/**
 * A row marked `responseKind: 'stream'` through the client's one request loop: the body comes
 * back unread as a stream (not parsed as JSON), errors still map to the error hierarchy. The row
 * is added to this test's copy of the table (vitest loads modules per file), since which streamed
 * routes exist is up to the modules that own them; the peer is a plain HTTP server on 127.0.0.1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { operations, type OperationId, type OperationSpec } from '../../src/api/index.js';
import { Core, type StreamResponse } from '../../src/client/core.js';
import { NotFoundError } from '../../src/client/index.js';

const row: OperationSpec = {
  client: ['test', 'bytes'],
  method: 'GET',
  path: '/v1/instance/{instance_id}/bytes',
  params: z.object({ instance_id: z.string() }),
  bodyKind: 'none',
  response: z.unknown(),
  responseKind: 'stream',
  idempotent: true,
};
(operations as unknown as Record<string, OperationSpec>)['testBytes'] = row;
const id = 'testBytes' as OperationId;

let server: Server;
let core: Core;
const payload = Buffer.from(Array.from({ length: 200_000 }, (_, i) => i % 251));

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url !== '/v1/instance/i-1/bytes') {
      res.writeHead(404, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ detail: 'Instance not found' }));
    }
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      'x-accept': req.headers.accept,
    });
    res.end(payload);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  core = new Core({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k', maxRetries: 0 });
});

afterAll(async () => {
  await core.close();
  await new Promise((r) => server.close(r));
});

describe('stream rows', () => {
  it('resolve to the unread body, byte for byte', async () => {
    const res = (await core.request(id, {
      params: { instance_id: 'i-1' },
    })) as unknown as StreamResponse;
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(res.headers['x-accept']).toBe('*/*');
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(payload)).toBe(true);
  });

  it('map an error status to the error hierarchy, like JSON rows', async () => {
    await expect(core.request(id, { params: { instance_id: 'nope' } })).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });
});
