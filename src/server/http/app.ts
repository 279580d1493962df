/**
 * The HTTP face of the server: one route per row of the operation table, API-key auth on every
 * route, FastAPI-shaped 422s, `{"detail": ...}` and `x-burrow-error` for every other error (a row
 * of the catalogue in `errors.ts`), and the WebSocket routes (`WEBSOCKET_ROUTES`: `/cdp/<id>/...`
 * and `/stream/<id>/...`). What the HTTP server itself refuses (slow or idle clients, too many
 * connections, `CONNECT`, unparseable requests) is in `limits.ts`; how JSON bodies are
 * parsed, in `request-body.ts`; what never reaches a log line, in `logger.ts`. A cluster node's
 * forwarding, placement and keys of projects are one plug-in (`cluster/plugin.ts`), registered
 * only on a node.
 */
import { EncodedJson } from '../../internal/encoded-json.js';
import type { ClusterHttpParts } from '../cluster/compose.js';
import { ClusterPlugin } from './cluster/plugin.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import multipart from '@fastify/multipart';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import {
  operations,
  operationIds,
  type JsonOperationId,
  type OperationSpec,
} from '../../api/index.js';
import { PUBLIC_PATHS, registerApiDocs } from './api-docs.js';
import { HEALTH_PATHS, healthAnswer, RUN_HEADER, type Health } from '../instances/health.js';
import { registerArtifactRoutes } from './artifact-routes.js';
import type { AuthStore } from '../auth-states/store.js';
import { HttpError, refuseUpgrade, serverError } from '../errors.js';
import { boundedLogger } from '../../internal/log-budget.js';
import { MULTIPART_LIMITS } from './upload.js';
import { createHandlers, type Handlers, type MultipartOperationId } from './handlers.js';
import {
  registerHandoffDone,
  tokenRoute,
  viewerAccess,
  withBanner,
  type ViewerAccess,
} from './handoff.js';
import type { ExtensionStore } from '../extensions/store.js';
import type { ProfileStore } from '../profiles/store.js';
import {
  authenticated,
  defaultHttpLimits,
  guardServer,
  serverOptions,
  type HttpLimits,
} from './limits.js';
import { requestSerializer } from './logger.js';
import { ADMIN } from '../cluster/keys.js';
import { registerMcpRoute } from './mcp.js';
import type { InstanceView, Registry } from '../instances/registry.js';
import { parseInput, parseJsonBody, RequestInvalid } from './request-body.js';

export { createLogger } from './logger.js';

export interface AppOptions {
  apiKey: string;
  registry: Registry;
  authStore: AuthStore;
  maxUploadBytes: number;
  logger: FastifyBaseLogger;
  /** Largest JSON request body in bytes; past it 413. Default 4 MiB (uploads have their own limit). */
  maxJsonBodyBytes?: number | undefined;
  /** Authenticated connections allowed per client address, past it 429; 0 means no cap. Default 64. */
  maxConnectionsPerClient?: number | undefined;
  /** Timeouts and rates of the HTTP server (see `limits.ts`); defaults there. */
  httpLimits?: Partial<Omit<HttpLimits, 'maxConnectionsPerClient'>> | undefined;
  /** The Chromium binary of browser instances, reported by `GET /v1/version`. */
  chromiumPath?: string | undefined;
  /** One auth state as captured from a browser, in bytes of its JSON; past it 413. Default 8 MiB. */
  maxAuthStateBytes?: number | undefined;
  /** Uploaded browser extensions (extensions/store.ts); absent, their routes answer 404. */
  extensions?: ExtensionStore | undefined;
  /** Persistent browser profiles (profiles/store.ts); absent, their routes answer 404. */
  profiles?: ProfileStore | undefined;
  /** The MCP endpoint's idle time and session cap (mcp.ts); defaults there. */
  mcp?: { idleMs?: number; maxSessions?: number; maxSessionsPerProject?: number } | undefined;
  /**
   * A cluster node's parts (../cluster/compose.ts): the app then registers the cluster's plug-in
   * (cluster/plugin.ts: forwarding, placement, keys of projects); absent, a single server.
   */
  cluster?: ClusterHttpParts | undefined;
  /** `GET /livez` and `GET /readyz` (../instances/health.ts); absent, readiness is always false. */
  health?: Health | undefined;
  /**
   * `POST /v1/node/drain` (`burrow drain`; ../cluster/drain.ts): begins the drain and answers when
   * the remaining instances will be stopped; absent, the route answers 404.
   */
  drain?: (() => Date) | undefined;
}

/** Default of `AppOptions.maxJsonBodyBytes`. */
export const DEFAULT_MAX_JSON_BODY_BYTES = 4 * 1024 * 1024;
/** Body limit of routes without a JSON body (what a client sends is read and dropped; multipart uploads stream past it). */
const NO_BODY_LIMIT = 64 * 1024;
/** Multipart limits besides the file size: one file, its fields, short field values. */
const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time string comparison (hashing first makes the lengths equal). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/** Sends `err` as `{"detail"}` with its status and headers (`x-burrow-error` among them). */
const sendError = (reply: FastifyReply, err: HttpError) =>
  reply.code(err.status).headers(err.responseHeaders).send({ detail: err.detail });

/**
 * The catalogue row of an error Fastify raised before or while reading the request (its own
 * messages would echo the URL and read differently from ours).
 */
function fastifyError(
  e: { code?: string; statusCode?: number; message?: string },
  limits: { upload: number; body: number },
): HttpError | undefined {
  switch (e.code) {
    case 'FST_REQ_FILE_TOO_LARGE':
      return serverError('upload_too_large', { limit: limits.upload });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return serverError('body_too_large', { limit: limits.body });
    case 'FST_ERR_BAD_URL':
      return serverError('bad_url');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return serverError('uri_too_long', { limit: MAX_PARAM_LENGTH });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return serverError('unsupported_media_type');
  }
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
    return serverError('bad_request', { detail: e.message ?? 'Bad request' });
  }
  return undefined;
}

const toFastifyPath = (p: string) => p.replace(/\{(\w+)\}/g, ':$1');
/** Longest path parameter Fastify routes (its default); longer ones answer `uri_too_long`. */
const MAX_PARAM_LENGTH = 100;

export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const limits: HttpLimits = {
    ...defaultHttpLimits,
    ...opts.httpLimits,
    ...(opts.maxConnectionsPerClient !== undefined && {
      maxConnectionsPerClient: opts.maxConnectionsPerClient,
    }),
  };
  const maxJsonBodyBytes = opts.maxJsonBodyBytes ?? DEFAULT_MAX_JSON_BODY_BYTES;
  const logRequest = requestSerializer([opts.apiKey]);
  const app = Fastify({
    loggerInstance: opts.logger,
    bodyLimit: maxJsonBodyBytes,
    forceCloseConnections: true,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // a malformed or over-long URL is refused before routing, so before the error handler
    frameworkErrors: (err, _req, reply) =>
      sendError(
        reply,
        fastifyError(err, { upload: opts.maxUploadBytes, body: maxJsonBodyBytes }) ??
          serverError('bad_request', { detail: err.message }),
      ),
    ...serverOptions(limits),
    // request URLs are logged without the key even if the logger was not told about it
    childLoggerFactory: (logger, bindings, childOpts) =>
      logger.child(bindings, {
        ...childOpts,
        serializers: { ...childOpts.serializers, req: logRequest },
      }),
  });
  const { registry, health } = opts;
  const cluster =
    opts.cluster &&
    new ClusterPlugin(opts.cluster, {
      authStore: opts.authStore,
      draining: () => health?.draining ?? false,
    });
  const guards = guardServer(app.server, limits, opts.logger, {
    forwardedClient: cluster?.forwardedClient,
  });
  const touched = touching(
    registry,
    createHandlers(registry, opts.authStore, {
      chromiumPath: opts.chromiumPath,
      maxAuthStateBytes: opts.maxAuthStateBytes,
      extensions: opts.extensions,
      profiles: opts.profiles,
      log: opts.logger,
      keys: cluster?.keys.keys,
      drain: opts.drain,
    }),
  );
  // a project key's calls see its project's rows only (cluster/keys.ts)
  const handlers = cluster ? cluster.keys.wrap(touched) : touched;

  // Bodies arrive as text and are parsed per route, so malformed JSON becomes a FastAPI 422.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  await app.register(multipart, {
    limits: { fileSize: opts.maxUploadBytes, ...MULTIPART_LIMITS },
    throwFileSizeLimit: true,
  });

  app.addHook('onRequest', guards.refuseOverCap);
  app.addHook('onRequest', async (req) => {
    if (req.url.startsWith('/stream/')) return; // live-view pages: per-instance token instead
    // the public description of the API (api-docs.ts says why it needs no key)
    if (req.method === 'GET' || req.method === 'HEAD') {
      const path = req.url.split('?', 1)[0]!;
      if (PUBLIC_PATHS.has(path) || HEALTH_PATHS.has(path)) return;
    }
    const key = req.headers['x-api-key'];
    if (typeof key !== 'string') throw serverError('unauthorized');
    // the server's own key is the admin; in cluster mode a project's key is looked up
    const principal = safeEqual(key, opts.apiKey) ? ADMIN : await cluster?.keys.authenticate(key);
    if (!principal) throw serverError('unauthorized');
    authenticated(req.raw.socket, req.raw);
    await cluster?.keys.admit(req, principal);
  });
  // a node's counting of refused starts, forwarding, principals and placement (cluster/plugin.ts)
  if (cluster) await app.register(cluster.register);

  // What clients' requests make the server log is bounded like an instance's lines
  // (internal/log-budget.ts): a client repeating a request that fails cannot fill the operator's
  // disk. Per kind of line and per level in each minute, then one summary line.
  const requestLog = boundedLogger(opts.logger, { per: 'server, for requests' });
  app.setErrorHandler((err: unknown, req, reply) => {
    if (err instanceof RequestInvalid) return reply.code(422).send({ detail: err.detail });
    if (err instanceof HttpError) {
      // a 503 is the machine's state (a program missing, no isolation), a 501 a feature this
      // server runs without (keys without a cluster), said in the answer: a warning without a
      // stack; other 5xx are errors
      if (err.status === 503 || err.status === 501) {
        requestLog.warn({ reqId: req.id, code: err.code }, err.detail);
      } else if (err.status >= 500) requestLog.error({ reqId: req.id, err }, err.detail);
      return sendError(reply, err);
    }
    const e = err as { statusCode?: number; code?: string; message?: string };
    const bodyLimit = req.routeOptions.bodyLimit ?? maxJsonBodyBytes;
    const known = fastifyError(e, { upload: opts.maxUploadBytes, body: bodyLimit });
    if (known) return sendError(reply, known);
    if (e.code === 'ECONNRESET' || req.raw.socket.destroyed) {
      // the client went away mid-request: nobody to answer, nothing wrong with the server
      req.log.debug({ err }, 'client closed the connection during the request');
      return sendError(reply, serverError('request_aborted'));
    }
    requestLog.error({ reqId: req.id, err }, 'unhandled error');
    return sendError(reply, serverError('internal_error'));
  });

  app.setNotFoundHandler((_req, reply) => sendError(reply, serverError('not_found')));

  registerStreamPages(app, registry);
  registerHandoffDone(app, registry);
  // the byte-stream rows of downloads and recordings (artifact-routes.ts)
  registerArtifactRoutes(app, registry);
  registerApiDocs(app);
  for (const path of HEALTH_PATHS) {
    app.get(path, async (req, reply) => {
      const answer = healthAnswer(opts.health, req.method, req.url)!;
      if (answer.run !== undefined) void reply.header(RUN_HEADER, answer.run);
      return reply
        .code(answer.status)
        .type('text/plain')
        .header('cache-control', 'no-store')
        .send(answer.body);
    });
  }

  for (const id of operationIds) {
    const op: OperationSpec = operations[id];
    // a row answered with a byte stream has its own route, registered by the module that owns it
    if (op.responseKind === 'stream') continue;
    app.route({
      method: op.method,
      url: toFastifyPath(op.path),
      bodyLimit: op.bodyKind === 'json' ? maxJsonBodyBytes : NO_BODY_LIMIT,
      handler: async (req: FastifyRequest, reply: FastifyReply) => {
        const params = op.params ? parseInput(op.params, req.params, 'path') : undefined;
        const query = op.query ? parseInput(op.query, req.query, 'query') : undefined;
        if (id === 'upload') {
          return handlers.upload({ params: params as { instance_id: string }, request: req });
        }
        if (id === 'extensionUpload') return handlers.extensionUpload({ request: req });
        const body = op.body ? parseInput(op.body, parseJsonBody(req.body), 'body') : undefined;
        const handler = handlers[id as Exclude<JsonOperationId, MultipartOperationId>] as (input: {
          params: unknown;
          query: unknown;
          body: unknown;
        }) => Promise<unknown>;
        const out = await handler({ params, query, body });
        if (out instanceof EncodedJson) {
          // encoded off the main thread (a notebook): its bytes as they are
          return reply
            .code(op.successStatus ?? 200)
            .type('application/json; charset=utf-8')
            .send(Buffer.from(out.bytes.buffer, out.bytes.byteOffset, out.bytes.byteLength));
        }
        return reply.code(op.successStatus ?? 200).send(out);
      },
    });
  }

  // MCP over Streamable HTTP (src/server/mcp/), behind the same API key
  // in a cluster its starts are placed, and other nodes' instances reached, as over HTTP
  registerMcpRoute(app, { handlers, ...opts.mcp, cluster: cluster?.mcp, log: requestLog });

  // WebSockets (`WEBSOCKET_ROUTES`); on a node, another node's instances are joined to it first
  const local = (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    handleUpgrade(registry, req, socket, head);
  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (cluster) cluster.upgrade(req, socket, head, local);
    else local(req, socket, head);
  });

  return app;
}

/**
 * `handlers` with every call naming an instance counted as its activity (the idle timeout of
 * `idle_timeout_seconds`): the HTTP routes and the MCP tools both call through these.
 */
function touching(registry: Registry, handlers: Handlers): Handlers {
  const out: Record<string, unknown> = {};
  for (const [name, handler] of Object.entries(handlers)) {
    out[name] = (input: { params?: { instance_id?: unknown } }) => {
      const id = input?.params?.instance_id;
      if (typeof id === 'string') registry.touch(id);
      return (handler as (i: unknown) => unknown)(input);
    };
  }
  return out as Handlers;
}

/**
 * A WebSocket upgrade the instance has not answered in this long is refused with 504 (a browser
 * paused, or stuck, while the handshake waited for it).
 */
export const UPGRADE_TIMEOUT_MS = 15_000;

/** What opens one of the WebSocket routes, and what the instance's runtime is told it is. */
interface WebSocketRoute {
  /** The token's name in a 401 (`token_invalid`). */
  what: 'CDP' | 'live-view';
  /** The access `token` gives to `rec`, or undefined when it gives none. */
  access(registry: Registry, rec: InstanceView, token: string): ViewerAccess | undefined;
}

/**
 * The WebSocket routes, by the first segment of `/<kind>/<id>/<rest>`: every upgrade the server
 * answers itself goes through this table (on a cluster node, one for another node's instance is
 * joined to that node first: cluster/plugin.ts).
 */
export const WEBSOCKET_ROUTES: Readonly<Record<'cdp' | 'stream', WebSocketRoute>> = {
  // `cdp_url`: DevTools through the instance's relay, with the instance's own token only
  cdp: {
    what: 'CDP',
    access: (_registry, rec, token) => (safeEqual(token, rec.token) ? {} : undefined),
  },
  // the live view's socket: the instance's token, or a pending hand-off's (handoff.ts)
  stream: {
    what: 'live-view',
    access: (registry, rec, token) => {
      try {
        return viewerAccess(registry, rec, token);
      } catch {
        return undefined;
      }
    },
  },
};

/**
 * Handles WebSocket upgrades by `WEBSOCKET_ROUTES` (token-checked). A paused instance is refused
 * at once (its frozen browser would never answer), and any handshake still unanswered after
 * `UPGRADE_TIMEOUT_MS` gets a 504.
 */
export function handleUpgrade(
  registry: Registry,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): void {
  socket.on('error', () => socket.destroy());
  const url = new URL(req.url ?? '/', 'http://localhost');
  const m = /^\/(cdp|stream)\/([^/]+)\/(.*)$/.exec(url.pathname);
  if (!m) return refuseUpgrade(socket, serverError('not_found'));
  const [, kind, id, rest] = m as unknown as [
    string,
    keyof typeof WEBSOCKET_ROUTES,
    string,
    string,
  ];
  const route = WEBSOCKET_ROUTES[kind];
  const token = url.searchParams.get('token') ?? '';
  let rec;
  try {
    rec = tokenRoute(registry, id, route.what);
  } catch (err) {
    return refuseUpgrade(socket, err instanceof HttpError ? err : serverError('internal_error'));
  }
  const access = route.access(registry, rec, token);
  if (!access) return refuseUpgrade(socket, serverError('token_invalid', { kind: route.what }));
  try {
    authenticated(socket, req);
  } catch (err) {
    return refuseUpgrade(socket, err as HttpError);
  }
  if (!rec.live || !rec.runtime?.upgrade) {
    return refuseUpgrade(socket, serverError('instance_gone', { id, state: rec.status }));
  }
  if (rec.status !== 'running') {
    return refuseUpgrade(socket, serverError('instance_not_running', { id, state: rec.status }));
  }
  const deadline = setTimeout(() => {
    // nothing written yet: neither the 101 nor a refusal
    if (socket.destroyed || (socket as Duplex & { bytesWritten?: number }).bytesWritten) return;
    const seconds = UPGRADE_TIMEOUT_MS / 1000;
    refuseUpgrade(socket, serverError('upgrade_timeout', { id, seconds }));
    setTimeout(() => socket.destroy(), 2_000).unref();
  }, UPGRADE_TIMEOUT_MS);
  deadline.unref();
  socket.once('close', () => clearTimeout(deadline));
  // an open client keeps the instance from being idle; a hand-off's socket closes as it ends
  socket.once('close', registry.connected(id));
  if (access.handoff) registry.handoffs.attach(access.handoff, socket);
  rec.runtime.upgrade(kind, rest, req, socket, head);
}

/** Live-view pages under `/stream/<id>/<rest>?token=…`. */
export function registerStreamPages(app: FastifyInstance, registry: Registry): void {
  app.get('/stream/:id/*', async (req, reply) => {
    const { id } = req.params as { id: string; '*': string };
    const rest = (req.params as Record<string, string>)['*'] ?? '';
    const url = new URL(req.url, 'http://localhost');
    const rec = tokenRoute(registry, id, 'live-view');
    const { handoff } = viewerAccess(registry, rec, url.searchParams.get('token') ?? '');
    authenticated(req.raw.socket, req.raw);
    registry.touch(id);
    const liveView = rec.live ? rec.runtime?.liveView : undefined;
    if (!liveView) throw serverError('live_view_unavailable');
    let page = await liveView.page(rest, url.searchParams);
    // a hand-off's page: the message and Done over the live view
    if (handoff && (rest === '' || rest === 'index.html') && page.status === 200) {
      page = await withBanner(page, handoff);
    }
    return reply
      .code(page.status)
      .type(page.type)
      .header('cache-control', 'no-store')
      .send(page.body);
  });
}
