/**
 * `/mcp` on `burrow serve`: the MCP server over Streamable HTTP, behind the API key like every
 * route (the app's auth hook runs first). Each MCP session (`mcp-session-id`) has its own tool
 * session (tools.ts) over this server's own handlers; it ends on `DELETE /mcp`, when the server
 * closes, after `idleMs` without a request (`emptyIdleMs` while it holds no instance), or when
 * the client goes away: a client that opened the standalone event stream (`GET /mcp`, as the
 * SDK's client does after initializing) and lets it close without reopening it within
 * `streamGraceMs` is gone — the SDK's `close()` aborts the stream but sends no `DELETE`. Its
 * instances stop with it. At most `maxSessions` exist at once, and at most `maxSessionsPerProject`
 * of one project's keys: an `initialize` past either answers 429 with a JSON-RPC error saying so
 * (each session costs the server about 200 KiB).
 *
 * The browser tools reach an instance's browser the way any client does: through the
 * token-checked CDP relay, opened on this server's own loopback address.
 *
 * In a cluster, `instance_start` is placed as `POST /v1/start` is (start-placement.ts: the same
 * code path), so its instance may run on another node. The session's calls for such an
 * instance go to its owner in one hop, as the forwarder (forward.ts) sends a client's: with the
 * key that opened the session (the owner checks it and its project) and the client's address
 * signed. So do the stops of a session that ends, also while this node closes. An instance
 * whose node was lost or left is asked through this node's own API, which answers for it as for
 * any client (its row, or 410). Its `cdp_url` is opened on loopback and forwarded as a client's.
 * In cluster mode a session is its opener's project's (`ownerOf`): another project's key naming
 * its id gets the unknown session's 404.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { z } from 'zod';
import {
  operations,
  validationDetail,
  wireParse,
  type BrowserStartResult,
  type CurrentUrlResult,
  type Instance,
  type StartRequest,
  type Location,
  type JsonOperationId,
  type ScreenshotResult,
  type StreamUrlResult,
} from '../../api/index.js';
import { HttpError, serverError } from '../errors.js';
import {
  DEFAULT_MCP_IDLE_SECONDS,
  DEFAULT_MCP_MAX_SESSIONS as DEFAULT_MAX_SESSIONS,
  DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT,
} from '../config.js';
import type { Handlers } from './handlers.js';
import type { Logger } from '../../internal/log.js';
import type { StartCaller, StartPlacement } from './start-placement.js';
import type { Route } from '../cluster/node.js';
import { running } from './key-handlers.js';
import { McpToolFailure, answerOf, type McpBackend } from '../mcp/backend.js';
import { createMcpSession, type McpSession } from '../mcp/tools.js';

/** Default of `McpRouteOptions.idleMs`: an MCP session unused this long ends. */
export const DEFAULT_MCP_IDLE_MS = DEFAULT_MCP_IDLE_SECONDS * 1000;
/** Default of `McpRouteOptions.emptyIdleMs`. */
export const DEFAULT_MCP_EMPTY_IDLE_MS = 2 * 60 * 1000;
/** Default of `McpRouteOptions.streamGraceMs`. */
export const DEFAULT_MCP_STREAM_GRACE_MS = 5_000;
/** Default of `McpRouteOptions.maxSessions`. */
export const DEFAULT_MCP_MAX_SESSIONS = DEFAULT_MAX_SESSIONS;

export interface McpRouteOptions {
  handlers: Handlers;
  log?: Logger | undefined; // lines requests cause: app.ts's bounded log (default `req.log`)
  /**
   * Ms without a request after which an MCP session ends (its instances stop). Default 30 min
   * (the server's `mcpIdleSeconds`, src/server/config.ts).
   */
  idleMs?: number;
  /**
   * The same for a session that holds no instance (nothing of the agent's is lost when it ends).
   * Default 2 min, or `idleMs` when that is shorter.
   */
  emptyIdleMs?: number;
  /**
   * How long a session whose event stream (`GET /mcp`) closed waits for the client to open it
   * again before it ends (the SDK's client reconnects within about 2.5 s). Default 5 s.
   */
  streamGraceMs?: number;
  /** MCP sessions open at once (the server has one API key); past it 429. Default 64 (`mcpMaxSessions`). */
  maxSessions?: number;
  /** Of those, one project's (the admin has `maxSessions` alone); past it 429. Default 16. */
  maxSessionsPerProject?: number;
  version?: string;
  /** Cluster mode: where `instance_start` starts, and how other nodes' instances are reached. */
  cluster?: McpCluster | undefined;
}

/** What the tools of a cluster node need besides its handlers. */
export interface McpCluster {
  /** Placement of starts, shared with `POST /v1/start`; it also sends the calls for other nodes. */
  placement: Pick<StartPlacement, 'start' | 'sendFor'>;
  /** Which node answers for instance `id` (../cluster/node.ts). */
  route: (id: string) => Promise<Route>;
  /** A start refused with this status (429, 503 count for the autoscaler: ../cluster/refusals.ts). */
  refused?: ((status: number) => void) | undefined;
}

/** A session of a cluster node: its cluster, and who opened it. */
interface McpRemote extends McpCluster {
  caller: StartCaller;
}

type Op = Exclude<JsonOperationId, 'upload'>;
type Input = { params?: unknown; query?: unknown; body?: unknown };

/** Whole seconds of a `Retry-After` header, if it has them. */
const retrySeconds = (value: unknown): number | undefined =>
  typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : undefined;

/** A 422's items as the tool failure's message (the same whether this node or another checked). */
const invalidRequest = (items: readonly { loc?: readonly unknown[]; msg?: string }[]): string =>
  `Invalid request: ${items.map((i) => `${(i.loc ?? []).join('.')}: ${i.msg ?? ''}`).join('; ')}`;

/** A handler's error as the tool failure the agent sees (same message and code as over HTTP). */
function failure(err: unknown): unknown {
  if (err instanceof HttpError) {
    const wait = retrySeconds(err.headers['Retry-After']);
    return new McpToolFailure(err.detail, err.code, err.status, wait);
  }
  return err;
}

/** This server's own address on loopback, as a URL origin (its listener may be a wildcard). */
function loopbackOrigin(app: FastifyInstance, scheme: 'http' | 'ws'): string {
  const addr = app.server.address() as AddressInfo;
  const host =
    addr.address === '0.0.0.0' ? '127.0.0.1' : addr.address === '::' ? '::1' : addr.address;
  const h = host.includes(':') ? `[${host}]` : host;
  return `${scheme}://${h}:${addr.port}`;
}

/**
 * The backend of the tools on this server: the operation handlers, validated as the routes do.
 * With `remote` (a cluster node), starts are placed and other nodes' instances reached through
 * this node's own API (see the file's comment).
 */
export function inProcessBackend(
  handlers: Handlers,
  app: FastifyInstance,
  remote?: McpRemote,
): McpBackend {
  const check = (schema: z.ZodType | undefined, value: unknown, where: Location) => {
    if (!schema) return undefined;
    const r = wireParse(schema, value ?? {});
    if (r.success) return r.data;
    throw new McpToolFailure(
      invalidRequest(validationDetail(r.error, where, value)),
      'validation_error',
      422,
    );
  };
  /**
   * Operation `id` for another node's instance: sent to its owner at `owner` in one hop, or
   * (no `owner`: that node is gone) through this node's own API.
   */
  const hop = async <T>(
    id: Op,
    input: Input,
    via: McpRemote,
    owner?: { node: string; url: string },
  ): Promise<T> => {
    const op = operations[id];
    const params = (input.params ?? {}) as Record<string, unknown>;
    let path = op.path.replace(/\{(\w+)\}/g, (_, k: string) =>
      encodeURIComponent(String(params[k])),
    );
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries((input.query ?? {}) as Record<string, unknown>)) {
      if (v !== undefined) query.set(k, String(v));
    }
    if (query.size > 0) path += `?${query.toString()}`;
    const target = new URL(path, owner?.url ?? loopbackOrigin(app, 'http'));
    const body = op.bodyKind === 'json' ? (input.body ?? {}) : undefined;
    let res;
    try {
      res = await via.placement.sendFor(via.caller, target, op.method, body, owner !== undefined);
    } catch (err) {
      const params = input.params as { instance_id?: string } | undefined;
      throw failure(
        serverError('node_unreachable', {
          id: params?.instance_id ?? '',
          node: owner?.node ?? 'this node',
          reason: (err as Error).message,
        }),
      );
    }
    const text = await res.body.text();
    let out: unknown;
    try {
      out = text === '' ? undefined : JSON.parse(text);
    } catch {
      out = { detail: text };
    }
    if (res.statusCode < 400) return out as T;
    const detail = (out as { detail?: unknown } | undefined)?.detail;
    const code = res.headers['x-burrow-error'];
    const message = Array.isArray(detail)
      ? invalidRequest(detail as { loc?: unknown[]; msg?: string }[])
      : typeof detail === 'string'
        ? detail
        : text;
    throw new McpToolFailure(
      message,
      typeof code === 'string' ? code : res.statusCode === 422 ? 'validation_error' : 'error',
      res.statusCode,
      retrySeconds(res.headers['retry-after']),
    );
  };
  const call = async <T>(id: Op, input: Input): Promise<T> => {
    const op = operations[id];
    const parsed = {
      params: check('params' in op ? op.params : undefined, input.params, 'path'),
      query: check('query' in op ? op.query : undefined, input.query, 'query'),
      body: check('body' in op ? op.body : undefined, input.body, 'body'),
    };
    const instanceId = (parsed.params as { instance_id?: unknown } | undefined)?.instance_id;
    if (remote && typeof instanceId === 'string') {
      // an id this node cannot place (the database away) is answered here: 404, as for a client
      const route = await remote.route(instanceId).catch(() => 'unknown' as const);
      if (typeof route === 'object') {
        return hop<T>(id, input, remote, route.ended ? undefined : route);
      }
    }
    const handler = handlers[id] as (i: typeof parsed) => Promise<unknown>;
    try {
      return answerOf(await handler(parsed)) as T;
    } catch (err) {
      throw failure(err);
    }
  };
  const inst = (instance_id: string) => ({ params: { instance_id } });

  /** `cdp_url` re-pointed at this server's loopback listener (the public URL may be a proxy's). */
  const local = (cdpUrl: string): string => {
    const u = new URL(cdpUrl);
    const at = u.pathname.indexOf('/cdp/');
    const path = at >= 0 ? u.pathname.slice(at) : u.pathname;
    return `${loopbackOrigin(app, 'ws')}${path}${u.search}`;
  };

  /** A start placed as `POST /v1/start` is: here, or on the node placement chose. */
  const start = async (body: unknown): Promise<Instance> => {
    if (!remote) return call('start', { body });
    const parsed = check(operations.start.body, body, 'body') as StartRequest;
    try {
      const placed = await remote.placement.start(parsed, remote.caller).catch((err: unknown) => {
        throw failure(err);
      });
      return placed ?? (await call<Instance>('start', { body }));
    } catch (err) {
      if (err instanceof McpToolFailure && err.status !== undefined) remote.refused?.(err.status);
      throw err;
    }
  };

  return {
    start,
    get: (id) => call('getInstance', inst(id)),
    list: () => call('listInstances', {}),
    stop: async (id) => {
      await call('stop', inst(id));
    },
    screenshot: async (id) => (await call<ScreenshotResult>('screenshot', inst(id))).base64_image,
    streamUrl: async (id) => (await call<StreamUrlResult>('streamUrl', inst(id))).stream_url,
    computer: (id, body) => call('computer', { ...inst(id), body }),
    bash: (id, body) => call('bash', { ...inst(id), body }),
    edit: (id, body) => call('edit', { ...inst(id), body }),
    file: (id, body) => call('file', { ...inst(id), body }),
    codeExecute: (id, body) => call('codeExecute', { ...inst(id), body }),
    cdpUrl: async (id) => local((await call<BrowserStartResult>('browserStart', inst(id))).cdp_url),
    currentUrl: async (id) =>
      (await call<CurrentUrlResult>('browserCurrentUrl', inst(id))).current_url,
    saveAuth: (id, name) =>
      call('saveAuth', { ...inst(id), query: name === undefined ? {} : { name } }),
    authenticate: async (id, authStateId) => {
      await call('authenticate', { ...inst(id), query: { auth_state_id: authStateId } });
    },
    handoff: (id, body) => call('handoffCreate', { ...inst(id), body }),
    handoffStatus: (id, handoffId, wait) =>
      call('handoffGet', {
        params: { instance_id: id, handoff_id: handoffId },
        query: { wait_seconds: String(wait) },
      }),
    extend: (id, body) => call('extend', { ...inst(id), body }),
    listAuthStates: () => call('listAuthStates', {}),
    listExtensions: () => call('extensionList', {}),
  };
}

interface Entry {
  transport: StreamableHTTPServerTransport;
  session: McpSession;
  timer?: NodeJS.Timeout;
  /** Requests of this session being handled (a session is never idle during one). */
  active: number;
  /** Event streams (`GET /mcp`) of this session open now. */
  streams: number;
  /** Runs out `streamGraceMs` after the last event stream closed. */
  gone?: NodeJS.Timeout;
  /** Who opened it (`ownerOf`): nobody else may use it. */
  owner: string;
  /** `session.close()` as whoever opened it. */
  close(): Promise<void>;
}

/**
 * Who the current request is, for MCP sessions: in cluster mode a project's key may use only
 * its project's sessions (a session holds its instances and open browser connections, which
 * the tools then use without naming the instance again), and the admin only its own.
 */
const ownerOf = (): string => {
  const who = running.getStore();
  return who && !who.admin ? `project ${who.project}` : 'admin';
};

const rpcError = (reply: FastifyReply, status: number, code: number, message: string) =>
  reply.code(status).send({ jsonrpc: '2.0', error: { code, message }, id: null });

export function registerMcpRoute(app: FastifyInstance, opts: McpRouteOptions): void {
  const sessions = new Map<string, Entry>();
  const idleMs = opts.idleMs ?? DEFAULT_MCP_IDLE_MS;
  const emptyIdleMs = Math.min(idleMs, opts.emptyIdleMs ?? DEFAULT_MCP_EMPTY_IDLE_MS);
  const maxSessions = opts.maxSessions ?? DEFAULT_MCP_MAX_SESSIONS;
  const maxPerProject = opts.maxSessionsPerProject ?? DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT;
  /** The owners of sessions made but not yet initialized (counted against the caps too). */
  const starting: string[] = [];
  const held = (owner: string) =>
    [...sessions.values(), ...starting.map((o) => ({ owner: o }))].filter((e) => e.owner === owner)
      .length;
  const streamGraceMs = opts.streamGraceMs ?? DEFAULT_MCP_STREAM_GRACE_MS;

  const end = (id: string, entry: Entry) => {
    clearTimeout(entry.timer);
    clearTimeout(entry.gone);
    void entry.transport.close();
    sessions.delete(id);
  };

  // the client's event stream closed: unless it comes back (or a request is running), the
  // client is gone and so is its session
  const armGone = (entry: Entry) => {
    clearTimeout(entry.gone);
    entry.gone = setTimeout(() => {
      const id = entry.transport.sessionId;
      if (id === undefined || sessions.get(id) !== entry || entry.streams > 0) return;
      if (entry.active > 0) return armGone(entry);
      end(id, entry);
    }, streamGraceMs);
    entry.gone.unref();
  };

  // (re)arms the idle timer; a session holding an instance gets the longer one
  const touch = (id: string, entry: Entry) => {
    clearTimeout(entry.timer);
    const ms = entry.session.instances.length > 0 ? idleMs : emptyIdleMs;
    entry.timer = setTimeout(() => {
      if (entry.active > 0) return touch(id, entry);
      end(id, entry);
    }, ms);
    entry.timer.unref();
  };

  app.route({
    method: ['GET', 'POST', 'DELETE'],
    url: '/mcp',
    handler: async (req, reply) => {
      const sid = req.headers['mcp-session-id'];
      let body: unknown;
      if (req.method === 'POST') {
        try {
          body = typeof req.body === 'string' ? JSON.parse(req.body) : req.body;
        } catch {
          return rpcError(reply, 400, -32700, 'Parse error: the body is not JSON');
        }
      }
      const owner = ownerOf();
      let entry = typeof sid === 'string' ? sessions.get(sid) : undefined;
      // another project's session is answered as one that does not exist
      if (entry && entry.owner !== owner) entry = undefined;
      if (!entry) {
        if (sid !== undefined) return rpcError(reply, 404, -32001, 'Session not found');
        if (req.method !== 'POST' || !isInitializeRequest(body)) {
          return rpcError(reply, 400, -32000, 'Bad Request: no valid MCP session id');
        }
        const full =
          sessions.size + starting.length >= maxSessions
            ? `Too many MCP sessions (limit ${maxSessions})`
            : owner !== 'admin' && held(owner) >= maxPerProject
              ? `Too many MCP sessions of this project (limit ${maxPerProject})`
              : undefined;
        if (full) {
          (opts.log ?? req.log).warn({ reqId: req.id, owner, full }, 'MCP session cap reached');
          reply.header('retry-after', String(Math.ceil(emptyIdleMs / 1000)));
          return rpcError(reply, 429, -32000, `${full}; end one with DELETE /mcp or retry later`);
        }
        // held from the check on: two initializes at once cannot both take the last place
        starting.push(owner);
        // a cluster node's session reaches other nodes' instances with the key that opened it
        const key = req.headers['x-api-key'];
        const remote =
          opts.cluster && typeof key === 'string'
            ? { ...opts.cluster, caller: { apiKey: key, client: req.socket.remoteAddress } }
            : undefined;
        const session = createMcpSession({
          backend: inProcessBackend(opts.handlers, app, remote),
          ...(opts.version !== undefined && { version: opts.version }),
        });
        // a session ends also outside any request of its client (its event stream gone, the
        // node closing): its stops then run as the key that opened it, which the project
        // scoping of a cluster asks of every call (cluster/keys.ts)
        const principal = running.getStore();
        const closeSession = () =>
          principal ? running.run(principal, () => session.close()) : session.close();
        const created: Entry = {
          session,
          active: 0,
          streams: 0,
          owner,
          close: closeSession,
          transport: new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            enableJsonResponse: true,
            onsessioninitialized: (id) => {
              sessions.set(id, created);
              touch(id, created);
            },
          }),
        };
        created.transport.onclose = () => {
          clearTimeout(created.timer);
          clearTimeout(created.gone);
          const id = created.transport.sessionId;
          if (id !== undefined) sessions.delete(id);
          void closeSession();
        };
        await session.server.connect(created.transport).catch((err: unknown) => {
          starting.splice(starting.indexOf(owner), 1);
          throw err;
        });
        entry = created;
      }
      const current = entry;
      const isNew = sid === undefined;
      current.active++;
      if (req.method === 'GET') {
        current.streams++;
        clearTimeout(current.gone);
        reply.raw.once('close', () => {
          current.streams--;
          if (current.streams === 0) armGone(current);
        });
      }
      reply.hijack();
      try {
        await current.transport.handleRequest(req.raw, reply.raw, body);
      } catch (err) {
        (opts.log ?? req.log).error({ reqId: req.id, err }, 'MCP request failed');
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(500, { 'content-type': 'application/json' });
          reply.raw.end(
            JSON.stringify({
              jsonrpc: '2.0',
              error: { code: -32603, message: 'Internal error' },
              id: null,
            }),
          );
        } else {
          reply.raw.destroy();
        }
      } finally {
        if (isNew) starting.splice(starting.indexOf(current.owner), 1);
        current.active--;
        const id = current.transport.sessionId;
        // the idle clock starts when the request ends (with the timer its instances call for)
        if (id !== undefined && sessions.get(id) === current) touch(id, current);
        else if (isNew) void current.transport.close().catch(() => undefined);
      }
    },
  });

  app.addHook('onClose', async () => {
    const all = [...sessions.values()];
    sessions.clear();
    await Promise.all(
      all.map(async (e) => {
        clearTimeout(e.timer);
        clearTimeout(e.gone);
        await e.transport.close().catch(() => undefined);
        await e.close();
      }),
    );
  });
}
