/**
 * `/mcp` on `burrow serve`: the MCP server over Streamable HTTP, behind the API key like every
 * route (the app's auth hook runs first). Each MCP session (`mcp-session-id`) has its own tool
 * session (tools.ts) over this server's own handlers; it ends on `DELETE /mcp`, when the server
 * closes, after `idleMs` without a request (`emptyIdleMs` while it holds no instance), or when
 * the client goes away: a client that opened the standalone event stream (`GET /mcp`, as the
 * SDK's client does after initializing) and lets it close without reopening it within
 * `streamGraceMs` is gone — the SDK's `close()` aborts the stream but sends no `DELETE`. Its
 * instances stop with it. At most `maxSessions` exist at once: an `initialize` past that answers
 * 429 with a JSON-RPC error saying so (each session costs the server about 200 KiB).
 *
 * The browser tools reach an instance's browser the way any client does: through the
 * token-checked CDP relay, opened on this server's own loopback address.
 *
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
  type Location,
  type JsonOperationId,
  type ScreenshotResult,
  type StreamUrlResult,
} from '../../api/index.js';
import { HttpError } from '../errors.js';
import {
  DEFAULT_MCP_IDLE_SECONDS,
  DEFAULT_MCP_MAX_SESSIONS as DEFAULT_MAX_SESSIONS,
} from '../config.js';
import type { Handlers } from './handlers.js';
import { running } from './key-handlers.js';
import { McpToolFailure, type McpBackend } from '../mcp/backend.js';
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
  version?: string;
}

type Op = Exclude<JsonOperationId, 'upload'>;
type Input = { params?: unknown; query?: unknown; body?: unknown };

/** A handler's error as the tool failure the agent sees (same message and code as over HTTP). */
function failure(err: unknown): unknown {
  if (err instanceof HttpError) return new McpToolFailure(err.detail, err.code, err.status);
  return err;
}

/** The backend of the tools on this server: the operation handlers, validated as the routes do. */
export function inProcessBackend(handlers: Handlers, app: FastifyInstance): McpBackend {
  const check = (schema: z.ZodType | undefined, value: unknown, where: Location) => {
    if (!schema) return undefined;
    const r = wireParse(schema, value ?? {});
    if (r.success) return r.data;
    const items = validationDetail(r.error, where, value);
    const msg = items.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; ');
    throw new McpToolFailure(`Invalid request: ${msg}`, 'validation_error', 422);
  };
  const call = async <T>(id: Op, input: Input): Promise<T> => {
    const op = operations[id];
    const parsed = {
      params: check('params' in op ? op.params : undefined, input.params, 'path'),
      query: check('query' in op ? op.query : undefined, input.query, 'query'),
      body: check('body' in op ? op.body : undefined, input.body, 'body'),
    };
    const handler = handlers[id] as (i: typeof parsed) => Promise<unknown>;
    try {
      return (await handler(parsed)) as T;
    } catch (err) {
      throw failure(err);
    }
  };
  const inst = (instance_id: string) => ({ params: { instance_id } });

  /** `cdp_url` re-pointed at this server's loopback listener (the public URL may be a proxy's). */
  const local = (cdpUrl: string): string => {
    const addr = app.server.address() as AddressInfo;
    const host =
      addr.address === '0.0.0.0' ? '127.0.0.1' : addr.address === '::' ? '::1' : addr.address;
    const u = new URL(cdpUrl);
    const at = u.pathname.indexOf('/cdp/');
    const path = at >= 0 ? u.pathname.slice(at) : u.pathname;
    const h = host.includes(':') ? `[${host}]` : host;
    return `ws://${h}:${addr.port}${path}${u.search}`;
  };

  return {
    start: (body) => call('start', { body }),
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
  /** Sessions made but not yet initialized (counted against the cap too). */
  let starting = 0;
  const backend = inProcessBackend(opts.handlers, app);
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
        if (sessions.size + starting >= maxSessions) {
          req.log.warn({ limit: maxSessions }, 'MCP session cap reached; refusing with 429');
          reply.header('retry-after', String(Math.ceil(emptyIdleMs / 1000)));
          return rpcError(
            reply,
            429,
            -32000,
            `Too many MCP sessions (limit ${maxSessions}); end one with DELETE /mcp or retry later`,
          );
        }
        const session = createMcpSession({
          backend,
          ...(opts.version !== undefined && { version: opts.version }),
        });
        const created: Entry = {
          session,
          active: 0,
          streams: 0,
          owner,
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
          void session.close();
        };
        await session.server.connect(created.transport);
        entry = created;
      }
      const current = entry;
      const isNew = sid === undefined;
      if (isNew) starting++;
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
        req.log.error({ err }, 'MCP request failed');
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
        if (isNew) starting--;
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
        await e.session.close();
      }),
    );
  });
}
