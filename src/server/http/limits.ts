/**
 * The HTTP server under Fastify, hardened against clients that hold connections without using
 * them, and answering what Node would otherwise drop or answer in its own shape:
 *
 * - A request head must arrive within `headersTimeoutMs` of the connection (or of the first byte
 *   of the next request on a keep-alive connection): an idle connection and one that trickles its
 *   headers a byte at a time (slowloris) get 408 and are closed. Node checks once a second.
 * - An idle keep-alive connection closes after `keepAliveTimeoutMs`.
 * - A request body must keep arriving at `minBodyBytesPerSecond` on average after a grace of
 *   `bodyGraceMs`: a large upload over a slow link is fine, a body trickled a byte at a time is
 *   cut. The clock stops when the request is fully received, so a handler's own time (a bash call
 *   with a ten-minute timeout) never counts. Node's fixed `requestTimeout` is off: no single
 *   duration fits both a 4 KiB JSON body and a 100 MiB upload.
 * - One client holds at most `maxConnectionsPerClient` authenticated connections (one
 *   that carried a request with the API key, or a token-checked live-view or CDP request); the
 *   request that would authenticate one more gets 429 `{"detail"}` with `Retry-After` and the
 *   connection closes. Connections that have not authenticated (just opened, half a request line,
 *   a 401, the public docs) have a budget of their own, `maxUnauthenticatedPerClient`: past it the
 *   oldest of them is closed, so idle or half-open sockets can neither fill the cap nor keep a
 *   real client of the same address from getting its request in. Other clients are not affected.
 *   A client is its address as the kernel reads it (`clientKey`, ../sandbox/egress/address.ts):
 *   IPv4-mapped IPv6 is the IPv4 address, every loopback address (127.0.0.0/8, `::1`) is one
 *   client, this host, and IPv6 counts by its /64, so a second loopback address or another
 *   address of one's /64 does not start a fresh count.
 *   In cluster mode a request another node forwarded counts against the client that node saw,
 *   when it says so with a valid signature (../cluster/forwarded-client.ts): a pooled
 *   connection between nodes counts against the client whose request it carries now. Anything
 *   else counts the socket's address, whatever headers it sends.
 * - `CONNECT` gets 405 instead of Node's silent close, and requests Node cannot parse (a garbage
 *   method, oversized headers) get `{"detail"}` with 400, 413 or 431 instead of Fastify's shape.
 * - A request target is made the one spelling the router matches before anything reads it
 *   (`originForm`): the absolute form (`GET http://host/v1/… HTTP/1.1`, a proxy's, which HTTP/1.1
 *   servers must accept) becomes the origin form (`/v1/…`), a fragment is dropped and escaped
 *   unreserved characters (`/v1/%69nstance/…`) are unescaped. Fastify's router matches all of
 *   these as the plain path, but every check that reads the URL itself (the project key's
 *   instance check, forwarding to the owner node, the placement of a start, the WebSocket
 *   routing) compares text: another spelling went past them all to the route.
 *
 * Every answer is a row of the error catalogue (`errors.ts`), with its `x-burrow-error` header.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { DEFAULT_MAX_CONNECTIONS_PER_CLIENT } from '../config.js';
import { rawErrorResponse, serverError, type HttpError } from '../errors.js';
import { clientKey } from '../sandbox/egress/address.js';

export interface HttpLimits {
  /** Time to receive a whole request head, in ms. Default 10 000. */
  headersTimeoutMs: number;
  /** Idle time after which a keep-alive connection is closed, in ms. Default 5 000. */
  keepAliveTimeoutMs: number;
  /** Time a request body may take before the rate below applies, in ms. Default 10 000. */
  bodyGraceMs: number;
  /** Slowest average rate a request body may arrive at once the grace is used up. Default 8 KiB/s. */
  minBodyBytesPerSecond: number;
  /** Authenticated connections allowed per client address; 0 means no cap at all. Default 64. */
  maxConnectionsPerClient: number;
  /**
   * Connections per client address that have not authenticated yet; past it the oldest one (open
   * for at least a second, or any once twice as many are open) is closed. Default 16.
   */
  maxUnauthenticatedPerClient: number;
}

export const defaultHttpLimits: Readonly<HttpLimits> = {
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  bodyGraceMs: 10_000,
  minBodyBytesPerSecond: 8 * 1024,
  maxConnectionsPerClient: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
  maxUnauthenticatedPerClient: 16,
};

/** A connection not yet authenticated is closed for a newer one only once it is this old. */
const EVICT_AFTER_MS = 1_000;

/** How often the body-rate guard looks at requests still arriving (Node's head check too). */
const CHECK_INTERVAL_MS = 1_000;

/** Writes `response` and closes `socket`, destroying it if the peer does not let go soon. */
function answerAndClose(socket: Duplex, response: string): void {
  socket.on('error', () => socket.destroy());
  if (socket.writable) socket.end(response);
  setTimeout(() => socket.destroy(), 2_000).unref();
}

/** The answer to an error Node's HTTP parser raised. */
function clientErrorAnswer(code: string | undefined): HttpError {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return serverError('request_timeout');
    case 'HPE_HEADER_OVERFLOW':
      return serverError('headers_too_large');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return serverError('chunk_extensions_too_large');
    case 'HPE_INVALID_METHOD':
      return serverError('invalid_method');
    default:
      return serverError('malformed_request');
  }
}

/**
 * Fastify's `clientErrorHandler`: answers a request Node could not parse, or whose head did not
 * arrive in time, with `{"detail"}`, unless a response is already under way on the connection.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    socket.write(rawErrorResponse(clientErrorAnswer(err.code)));
  }
  socket.destroy();
}

/** The options Fastify passes to `http.createServer` and sets on the server it creates. */
export function serverOptions(limits: HttpLimits) {
  return {
    http: {
      headersTimeout: limits.headersTimeoutMs,
      connectionsCheckingInterval: CHECK_INTERVAL_MS,
      requestTimeout: 0,
    },
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: 0,
    clientErrorHandler: answerClientError,
  };
}

/** The client a socket counts against: its peer's address as `clientKey` reads it. */
const clientAddress = (socket: { remoteAddress?: string | undefined }) =>
  clientKey(socket.remoteAddress ?? 'unknown');

export interface HttpGuards {
  /** Fastify `onRequest` hook: throws the 429 for a request on a connection past the cap. */
  refuseOverCap(req: FastifyRequest): Promise<void>;
}

/** Per socket of a guarded server: counts it as authenticated, or throws the 429. */
const admitters = new WeakMap<object, (req: IncomingMessage | undefined) => void>();

/**
 * `socket` carried an authenticated request `req` (the API key, or a valid token): from now on
 * it counts against its client's cap instead of the unauthenticated budget. The client is the
 * socket's address, or the signed one of a request forwarded by another node (`GuardOptions`).
 * Throws the 429 when that client already holds `maxConnectionsPerClient` authenticated
 * connections. No-op for sockets of an unguarded server.
 */
export function authenticated(socket: object, req?: IncomingMessage): void {
  admitters.get(socket)?.(req);
}

export interface GuardOptions {
  /** The client a forwarded request proves it carries (../cluster/forwarded-client.ts), if any. */
  forwardedClient?: ((req: IncomingMessage) => string | undefined) | undefined;
}

interface ClientConnections {
  authenticated: number;
  /** Connections not yet authenticated, oldest first, with the time each was opened. */
  pending: Map<Duplex, number>;
}

/**
 * Installs the connection cap, the body-rate guard and the `CONNECT` answer on `server`. The
 * cap's 429 is thrown by `authenticated` (called by the app's auth hook, so it goes through the
 * app's error handler, and by the upgrade routing for token-checked WebSockets).
 */
/** A character RFC 3986 calls unreserved: its percent-encoded form means the same (§6.2.2.2). */
const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * `url` (a request target) as every reader of a request sees it: in origin form (an absolute
 * `http(s)://host/path?query` becomes `/path?query`), without a fragment (no client sends one;
 * the router ignores it), and with unreserved characters of the path unescaped (`/v1/%69nstance`
 * is `/v1/instance`: the router matches them unescaped too). `*` and what does not parse stay as
 * they are (routing refuses them).
 */
export function originForm(url: string): string {
  let target = url;
  if (!target.startsWith('/')) {
    if (target === '*') return target;
    let parsed: URL;
    try {
      parsed = new URL(target);
    } catch {
      return url;
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return url;
    target = parsed.pathname + parsed.search;
  }
  const hash = target.indexOf('#');
  if (hash >= 0) target = target.slice(0, hash);
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const plain = path.replace(/%([0-9A-Fa-f]{2})/g, (escaped, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : escaped;
  });
  return q < 0 ? plain : plain + target.slice(q);
}

export function guardServer(
  server: Server,
  limits: HttpLimits,
  log: FastifyBaseLogger,
  opts: GuardOptions = {},
): HttpGuards {
  // before Fastify's listener and the upgrade routing: every later reader sees a path
  const toOriginForm = (req: IncomingMessage) => {
    if (req.url !== undefined) req.url = originForm(req.url);
  };
  server.prependListener('request', toOriginForm);
  const cap = limits.maxConnectionsPerClient;
  const budget = Math.max(1, limits.maxUnauthenticatedPerClient);
  const clients = new Map<string, ClientConnections>();
  const overCap = new WeakSet<object>();
  const warned = new Set<string>();
  const evictionLogged = new Set<string>();
  const tooMany = (address: string) => serverError('too_many_connections', { address, limit: cap });
  const entry = (address: string): ClientConnections => {
    let client = clients.get(address);
    if (!client) {
      client = { authenticated: 0, pending: new Map() };
      clients.set(address, client);
    }
    return client;
  };
  const release = (address: string) => {
    const c = clients.get(address);
    if (c && c.authenticated === 0 && c.pending.size === 0) clients.delete(address);
  };

  server.on('connection', (socket: Duplex & { remoteAddress?: string }) => {
    if (cap <= 0) return;
    const address = clientAddress(socket);
    const c = entry(address);
    const now = performance.now();
    c.pending.set(socket, now);
    // past the budget the oldest unauthenticated connection goes, once it had its chance
    const [oldest, since] = c.pending.entries().next().value as [Duplex, number];
    if (
      c.pending.size > budget &&
      oldest !== socket &&
      (now - since >= EVICT_AFTER_MS || c.pending.size > 2 * budget)
    ) {
      c.pending.delete(oldest);
      if (!evictionLogged.has(address)) {
        evictionLogged.add(address);
        log.warn(
          { client: address, limit: budget },
          'too many unauthenticated connections; closing the oldest',
        );
      }
      oldest.destroy();
    }
    /** The client this socket counts against once authenticated (a forwarded one may change). */
    let counted: string | undefined;
    admitters.set(socket, (req) => {
      const signed = req && opts.forwardedClient?.(req);
      const client = signed ? clientAddress({ remoteAddress: signed }) : address;
      if (counted === client) return;
      if (overCap.has(socket)) throw tooMany(client);
      c.pending.delete(socket);
      const to = entry(client);
      if (to.authenticated >= cap) {
        overCap.add(socket);
        if (!warned.has(client)) {
          warned.add(client);
          log.warn({ client, limit: cap }, 'connection cap reached; refusing with 429');
        }
        release(client);
        throw tooMany(client);
      }
      if (counted !== undefined) {
        // a pooled connection of another node, now carrying another client's request
        const before = clients.get(counted)!;
        before.authenticated--;
        if (before.authenticated < cap) warned.delete(counted);
        release(counted);
      }
      counted = client;
      to.authenticated++;
    });
    socket.once('close', () => {
      c.pending.delete(socket);
      if (counted !== undefined) {
        const held = clients.get(counted)!;
        held.authenticated--;
        if (held.authenticated < cap) warned.delete(counted);
        release(counted);
      }
      if (c.pending.size === 0) evictionLogged.delete(address);
      release(address);
    });
  });

  server.prependListener('upgrade', (req: IncomingMessage, socket: Duplex) => {
    toOriginForm(req);
    if (server.listenerCount('upgrade') === 1) {
      // nobody else handles upgrades (an app without the WebSocket routes): not found
      answerAndClose(socket, rawErrorResponse(serverError('not_found')));
    }
  });

  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    answerAndClose(
      socket,
      rawErrorResponse(serverError('method_not_allowed', { method: 'CONNECT' })),
    );
  });

  // The body-rate guard: every request is watched from its head until it is fully received.
  const arriving = new Map<IncomingMessage, { since: number; bytesAtStart: number }>();
  server.on('request', (req: IncomingMessage) => {
    arriving.set(req, { since: performance.now(), bytesAtStart: req.socket.bytesRead });
  });
  const check = setInterval(() => {
    const now = performance.now();
    for (const [req, { since, bytesAtStart }] of arriving) {
      if (req.complete || req.socket.destroyed) {
        arriving.delete(req);
        continue;
      }
      const received = req.socket.bytesRead - bytesAtStart;
      const allowed = limits.bodyGraceMs + (received / limits.minBodyBytesPerSecond) * 1000;
      if (now - since > allowed) {
        arriving.delete(req);
        log.info(
          { client: clientAddress(req.socket), received },
          'request body arriving too slowly; closing the connection',
        );
        req.socket.destroy();
      }
    }
  }, CHECK_INTERVAL_MS).unref();
  server.once('close', () => clearInterval(check));

  return {
    async refuseOverCap(req) {
      if (overCap.has(req.raw.socket)) throw tooMany(clientAddress(req.raw.socket));
    },
  };
}
