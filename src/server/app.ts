/**
 * The HTTP face of the server: one route per row of the operation table, API-key auth on every
 * route, FastAPI-shaped 422s, `{"detail": ...}` for every other error, and the WebSocket upgrade
 * routing for `/cdp/<id>/...` and `/stream/<id>/...`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import type { Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import multipart from '@fastify/multipart';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { pino } from 'pino';
import type { z } from 'zod';
import {
  jsonErrorOffset,
  operations,
  operationIds,
  UploadFields,
  validationDetail,
  wireParse,
  type Location,
  type OperationId,
  type OperationSpec,
  type ValidationErrorItem,
} from '../api/index.js';
import type { AuthStore } from './auth-store.js';
import { HttpError } from './errors.js';
import { createHandlers } from './handlers.js';
import type { Registry } from './registry.js';

export interface AppOptions {
  apiKey: string;
  registry: Registry;
  authStore: AuthStore;
  maxUploadBytes: number;
  logger: FastifyBaseLogger;
}

/** The server's pino logger; request URLs are logged with `token=` values redacted. */
export function createLogger(level: string): FastifyBaseLogger {
  return pino({
    level,
    serializers: {
      req: (req: { method?: string; url?: string }) => ({
        method: req.method,
        url: redactUrl(req.url ?? ''),
      }),
    },
  });
}

/** A request that failed validation: answered 422 with FastAPI's body. */
class RequestInvalid extends Error {
  constructor(readonly detail: ValidationErrorItem[]) {
    super('request validation failed');
  }
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time string comparison (hashing first makes the lengths equal). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/** Redacts `token=` query values from URLs before they reach a log line. */
export const redactUrl = (url: string) => url.replace(/([?&]token=)[^&]*/g, '$1[redacted]');

function parse<S extends z.ZodType>(schema: S, value: unknown, where: Location): z.output<S> {
  const r = wireParse(schema, value);
  if (!r.success) throw new RequestInvalid(validationDetail(r.error, where, value));
  return r.data;
}

function parseJsonBody(raw: unknown): unknown {
  if (raw === undefined || raw === null || raw === '') return {};
  if (typeof raw !== 'string') return raw;
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw);
  } catch {
    const offset = Math.max(0, jsonErrorOffset(raw));
    throw new RequestInvalid([
      {
        loc: ['body', offset],
        msg: 'JSON decode error',
        type: 'json_invalid',
        ctx: { error: 'Invalid JSON' },
      },
    ]);
  }
}

const toFastifyPath = (p: string) => p.replace(/\{(\w+)\}/g, ':$1');

export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: opts.logger,
    bodyLimit: 64 * 1024 * 1024,
    forceCloseConnections: true,
  });
  const { registry } = opts;
  const handlers = createHandlers(registry, opts.authStore);

  // Bodies arrive as text and are parsed per route, so malformed JSON becomes a FastAPI 422.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  await app.register(multipart, {
    limits: { fileSize: opts.maxUploadBytes, files: 1, fields: 10 },
    throwFileSizeLimit: true,
  });

  app.addHook('onRequest', async (req) => {
    if (req.url.startsWith('/stream/')) return; // live-view pages: per-instance token instead
    const key = req.headers['x-api-key'];
    if (typeof key !== 'string' || !safeEqual(key, opts.apiKey)) {
      throw new HttpError(401, 'Missing or invalid API key (header x-api-key)');
    }
  });

  app.setErrorHandler((err: unknown, req, reply) => {
    if (err instanceof RequestInvalid) return reply.code(422).send({ detail: err.detail });
    if (err instanceof HttpError) {
      if (err.status >= 500) req.log.error({ err }, err.detail);
      return reply.code(err.status).headers(err.headers).send({ detail: err.detail });
    }
    const e = err as { statusCode?: number; code?: string; message?: string };
    if (e.code === 'FST_REQ_FILE_TOO_LARGE' || e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply
        .code(413)
        .header('connection', 'close')
        .send({
          detail: `Request body too large (limit ${opts.maxUploadBytes} bytes for uploads)`,
        });
    }
    if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
      return reply.code(e.statusCode).send({ detail: e.message ?? 'Bad request' });
    }
    req.log.error({ err }, 'unhandled error');
    return reply.code(500).send({ detail: 'Internal server error' });
  });

  app.setNotFoundHandler((_req, reply) => reply.code(404).send({ detail: 'Not Found' }));

  registerStreamPages(app, registry);

  for (const id of operationIds) {
    const op: OperationSpec = operations[id];
    app.route({
      method: op.method,
      url: toFastifyPath(op.path),
      handler: async (req: FastifyRequest, reply: FastifyReply) => {
        const params = op.params ? parse(op.params, req.params, 'path') : undefined;
        const query = op.query ? parse(op.query, req.query, 'query') : undefined;
        if (id === 'upload') return upload(req, (params as { instance_id: string }).instance_id);
        const body = op.body ? parse(op.body, parseJsonBody(req.body), 'body') : undefined;
        const handler = handlers[id as Exclude<OperationId, 'upload'>] as (input: {
          params: unknown;
          query: unknown;
          body: unknown;
        }) => Promise<unknown>;
        const out = await handler({ params, query, body });
        return reply.send(out);
      },
    });
  }

  /** Streams the multipart file to the instance; spools it first if `path` comes after it. */
  async function upload(req: FastifyRequest, instanceId: string) {
    const rec = registry.running(instanceId);
    if (!rec.runtime.upload)
      throw new HttpError(400, `upload is not available on ${rec.type} instances`);
    if (!req.isMultipart()) {
      throw new RequestInvalid([
        { loc: ['body', 'file'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'path'], msg: 'Field required', type: 'missing' },
      ]);
    }
    const fields: Record<string, string> = {};
    let spooled: { file: string; filename: string; mimetype: string } | undefined;
    let result: unknown;
    try {
      for await (const part of req.parts()) {
        if (part.type === 'field') {
          if (typeof part.value === 'string') fields[part.fieldname] = part.value;
          continue;
        }
        if (part.fieldname !== 'file' || result !== undefined || spooled) {
          part.file.resume();
          continue;
        }
        if (fields.path !== undefined) {
          const { path } = parse(UploadFields, fields, 'body');
          result = await rec.runtime.upload(path, part.filename, part.mimetype, part.file);
        } else {
          const file = join(
            rec.dir,
            `.upload-spool-${Date.now()}-${Math.random().toString(16).slice(2)}`,
          );
          spooled = { file, filename: part.filename, mimetype: part.mimetype };
          await pipeline(part.file, createWriteStream(file, { mode: 0o600 }));
        }
      }
      if (result === undefined) {
        const missing: ValidationErrorItem[] = [];
        if (!spooled)
          missing.push({ loc: ['body', 'file'], msg: 'Field required', type: 'missing' });
        if (fields.path === undefined)
          missing.push({ loc: ['body', 'path'], msg: 'Field required', type: 'missing' });
        if (missing.length > 0) throw new RequestInvalid(missing);
        const { path } = parse(UploadFields, fields, 'body');
        const s = spooled!;
        const stream: Readable = createReadStream(s.file);
        result = await rec.runtime.upload(path, s.filename, s.mimetype, stream);
      }
      return result;
    } finally {
      if (spooled) await rm(spooled.file, { force: true });
    }
  }

  return app;
}

/** Handles WebSocket upgrades for `/cdp/<id>/<rest>` and `/stream/<id>/<rest>` (token-checked). */
export function handleUpgrade(
  registry: Registry,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): void {
  const refuse = (status: number, text: string) => {
    socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  };
  socket.on('error', () => socket.destroy());
  const url = new URL(req.url ?? '/', 'http://localhost');
  const m = /^\/(cdp|stream)\/([^/]+)\/(.*)$/.exec(url.pathname);
  if (!m) return refuse(404, 'Not Found');
  const [, kind, id, rest] = m as unknown as [string, 'cdp' | 'stream', string, string];
  const token = url.searchParams.get('token') ?? '';
  let rec;
  try {
    rec = registry.get(id);
  } catch {
    return refuse(404, 'Not Found');
  }
  if (!safeEqual(token, rec.token)) return refuse(401, 'Unauthorized');
  if (!rec.live || !rec.runtime?.upgrade) return refuse(410, 'Gone');
  rec.runtime.upgrade(kind, rest, req, socket, head);
}

/** Live-view pages under `/stream/<id>/<rest>?token=…`. */
export function registerStreamPages(app: FastifyInstance, registry: Registry): void {
  app.get('/stream/:id/*', async (req, reply) => {
    const { id } = req.params as { id: string; '*': string };
    const rest = (req.params as Record<string, string>)['*'] ?? '';
    const url = new URL(req.url, 'http://localhost');
    const rec = registry.get(id);
    if (!safeEqual(url.searchParams.get('token') ?? '', rec.token)) {
      throw new HttpError(401, 'Invalid or expired live-view token');
    }
    if (!rec.live || !rec.runtime?.streamPage)
      throw new HttpError(404, 'No live view for this instance');
    const page = await rec.runtime.streamPage(rest, url.searchParams);
    return reply
      .code(page.status)
      .type(page.type)
      .header('cache-control', 'no-store')
      .send(page.body);
  });
}
