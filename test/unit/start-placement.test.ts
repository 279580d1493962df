/**
 * The start's placement seam (src/server/http/start-placement.ts) between real HTTP servers
 * standing for nodes: a start goes to the chosen node in one hop with its body and the
 * forwarded-by mark, a node that refuses for lack of room (its 429) is left out and the start
 * placed once more, and a start nobody takes is the cluster's 429 with a computed Retry-After.
 * A start that is forwarded already or invalid stays on the node it reached; one naming a profile
 * or extensions is placed by load (never on a warm instance).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NodeLoad } from '../../src/server/cluster/placement.js';
import { HttpError } from '../../src/server/errors.js';
import { StartPlacement } from '../../src/server/http/start-placement.js';

interface FakeNode {
  server: Server;
  url: string;
  hits: { headers: IncomingMessage['headers']; body: string }[];
  status: number;
}

async function fakeNode(status: number): Promise<FakeNode> {
  const node: FakeNode = { server: createServer(), url: '', hits: [], status };
  node.server.on('request', (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      node.hits.push({ headers: req.headers, body });
      res.writeHead(node.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ answered_by: node.url, status: node.status }));
    });
  });
  await new Promise<void>((r) => node.server.listen(0, '127.0.0.1', r));
  node.url = `http://127.0.0.1:${(node.server.address() as AddressInfo).port}`;
  return node;
}

const load = (name: string, url: string, live: number, capacity = 2): NodeLoad => ({
  name,
  url,
  capacity,
  freeSlots: capacity - live,
  warm: {},
  state: 'up',
  leased: true,
});

let a: FakeNode;
let b: FakeNode;
let app: FastifyInstance;
let nodes: NodeLoad[] = [];
let self = { capacity: 2, freeSlots: 0, warm: {} };
let placement: StartPlacement;

beforeAll(async () => {
  a = await fakeNode(200);
  b = await fakeNode(200);
  placement = new StartPlacement({
    name: 'self',
    // the instance rows the Retry-After is computed from: one live instance with 40 s left
    db: {
      query: (async (text: string) =>
        /expires_at/.test(text)
          ? { rows: [{ left: 40 }], rowCount: 1 }
          : { rows: [{ n: 0 }], rowCount: 1 }) as never,
    },
    view: { nodes: () => nodes, close: () => {} },
    local: () => self,
    k: 3,
  });
  app = Fastify();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.addHook('preHandler', placement.hook);
  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof HttpError) {
      return reply.code(err.status).headers(err.responseHeaders).send({ detail: err.detail });
    }
    return reply.code(500).send({ detail: String(err) });
  });
  app.post('/v1/start', async () => ({ answered_by: 'self' }));
  await app.listen({ port: 0, host: '127.0.0.1' });
});

afterEach(() => {
  a.hits.length = 0;
  b.hits.length = 0;
  a.status = 200;
  b.status = 200;
  self = { capacity: 2, freeSlots: 0, warm: {} };
});

afterAll(async () => {
  await app.close();
  await placement.close();
  a.server.close();
  b.server.close();
});

const post = async (body: string, headers: Record<string, string> = {}) => {
  const { port } = app.server.address() as AddressInfo;
  const res = await fetch(`http://127.0.0.1:${port}/v1/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as never };
};

describe('the start placement seam', () => {
  it('forwards to the less loaded node in one hop, with the body and the forwarded-by mark', async () => {
    nodes = [load('a', a.url, 1), load('b', b.url, 0)];
    const body = '{"instance_type":"browser","timeout_hours":0.5}';
    const r = await post(body, { 'x-api-key': 'k' });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ answered_by: b.url, status: 200 });
    expect(a.hits).toHaveLength(0);
    expect(b.hits).toHaveLength(1);
    expect(b.hits[0]!.body).toBe(body);
    expect(b.hits[0]!.headers['x-burrow-forwarded-by']).toBe('self');
    expect(b.hits[0]!.headers['x-api-key']).toBe('k');
  });

  it('starts here when this node is the choice', async () => {
    self = { capacity: 2, freeSlots: 2, warm: {} };
    nodes = [load('a', a.url, 1), load('b', b.url, 1)];
    expect((await post('{"instance_type":"browser"}')).json).toEqual({ answered_by: 'self' });
    expect(a.hits.length + b.hits.length).toBe(0);
  });

  it('places once more without a node that answered 429, and relays other errors as they are', async () => {
    nodes = [load('a', a.url, 0), load('b', b.url, 1)];
    a.status = 429; // it filled up since it advertised
    const r = await post('{"instance_type":"browser"}');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ answered_by: b.url, status: 200 });
    expect(a.hits).toHaveLength(1);
    expect(b.hits).toHaveLength(1);
    // a 500 of the chosen node is its answer, not a reason to start twice
    a.status = 500;
    const failed = await post('{"instance_type":"browser"}');
    expect(failed.status).toBe(500);
    expect(b.hits).toHaveLength(1);
  });

  it('gives up after two refusals with the cluster’s 429 and a Retry-After from the load', async () => {
    nodes = [load('a', a.url, 0), load('b', b.url, 0)];
    a.status = 429;
    b.status = 429;
    const r = await post('{"instance_type":"ubuntu"}');
    expect(r.status).toBe(429);
    expect(r.headers.get('x-burrow-error')).toBe('cluster_at_capacity');
    expect(r.headers.get('retry-after')).toBe('40'); // the one deadline, 40 s away
    expect(a.hits.length + b.hits.length).toBe(2);
  });

  it('answers 429 without a hop when no node has room', async () => {
    nodes = [load('a', a.url, 2), { ...load('b', b.url, 0), state: 'draining' }];
    const r = await post('{"instance_type":"browser"}');
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('40');
    expect(a.hits.length + b.hits.length).toBe(0);
  });

  it('places a start naming a profile or extensions like any other, never on a warm instance', async () => {
    // a has a warm browser and more load; b is the less loaded: a start the pool cannot serve
    // goes by load (the profile and the extension are the cluster's, fetched where it lands)
    nodes = [{ ...load('a', a.url, 1), warm: { browser: 1 } }, load('b', b.url, 0)];
    for (const body of [
      '{"instance_type":"browser","profile":{"name":"p"}}',
      '{"instance_type":"browser","extensions":["ext_0123456789abcdef"]}',
    ]) {
      const r = await post(body);
      expect(r.json, body).toEqual({ answered_by: b.url, status: 200 });
    }
    expect(a.hits).toHaveLength(0);
    expect(b.hits.map((h) => h.body)).toHaveLength(2);
  });

  it('keeps here a start already forwarded and an invalid one', async () => {
    nodes = [load('a', a.url, 0)];
    for (const [body, headers] of [
      ['{"instance_type":"browser"}', { 'x-burrow-forwarded-by': 'other' }],
      ['{"instance_type":', {}],
      ['{"instance_type":"browser","timeout_hours":-1}', {}],
    ] as const) {
      const r = await post(body, headers);
      expect(r.json, body).toEqual({ answered_by: 'self' });
    }
    expect(a.hits).toHaveLength(0);
  });
});
