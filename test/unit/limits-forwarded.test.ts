/**
 * The per-client connection cap (src/server/http/limits.ts) with clients that a forwarding node
 * vouches for: a connection counts against the client its request proves, a pooled connection
 * moves to the client of its latest request (freeing the one before), and a request that proves
 * nothing counts the socket's address. A real HTTP server on loopback; the proof here is a plain
 * header the test's verifier reads (the signature itself: forwarded-client.test.ts).
 */
import { createServer, request, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpError } from '../../src/server/errors.js';
import { authenticated, defaultHttpLimits, guardServer } from '../../src/server/http/limits.js';

const silent = { warn() {}, info() {} } as never;
let server: Server;
let port = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    try {
      authenticated(req.socket, req);
      res.end('ok');
    } catch (err) {
      res.writeHead((err as HttpError).status, { connection: 'close' });
      res.end((err as HttpError).detail);
    }
  });
  guardServer(server, { ...defaultHttpLimits, maxConnectionsPerClient: 1 }, silent, {
    forwardedClient: (req) => {
      const v = req.headers['x-test-client'];
      return typeof v === 'string' ? v : undefined;
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

/** One keep-alive connection; `send` answers the status. */
function connection() {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const send = (client?: string) =>
    new Promise<number>((ok, fail) => {
      const req = request(
        { port, host: '127.0.0.1', agent, headers: client ? { 'x-test-client': client } : {} },
        (res) => {
          res.resume();
          res.on('end', () => ok(res.statusCode!));
        },
      );
      req.on('error', fail);
      req.end();
    });
  return { send, close: () => agent.destroy() };
}

describe('the connection cap with forwarded clients', () => {
  it('counts the proven client, moves a pooled connection, else counts the socket', async () => {
    const pooled = connection();
    const other = connection();
    const third = connection();
    try {
      expect(await pooled.send('198.51.100.1')).toBe(200);
      // the same client on another connection: past its cap of 1
      expect(await other.send('198.51.100.1')).toBe(429);
      // the pooled connection now carries another client's request: the first is free again
      expect(await pooled.send('198.51.100.2')).toBe(200);
      expect(await third.send('198.51.100.1')).toBe(200);
      // a request without proof counts the socket's own address, which holds nothing yet
      const plain = connection();
      const plain2 = connection();
      try {
        expect(await plain.send()).toBe(200);
        expect(await plain2.send()).toBe(429);
      } finally {
        plain.close();
        plain2.close();
      }
    } finally {
      pooled.close();
      other.close();
      third.close();
    }
  });
});
