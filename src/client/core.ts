/**
 * The one request loop (docs/architecture.md): every client method is a row of the operation table
 * passed through `Core.request`, which validates the input, encodes the path, sends with the API
 * key, applies the timeout, abort signal and retry policy, maps failures to the error hierarchy and
 * checks the response against its schema.
 */
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { errors, Pool, type Dispatcher } from 'undici';
import type { z } from 'zod';
import {
  operations,
  validationDetail,
  wireParse,
  type Location,
  type OperationId,
  type OperationSpec,
  type Operations,
} from '../api/index.js';
import {
  AbortError,
  APIError,
  ClientClosedError,
  ConfigurationError,
  ConnectionError,
  ContractError,
  InvalidRequestError,
  RequestFailedError,
  TimeoutError,
  type RequestTarget,
} from './errors.js';
import { debug } from './debug.js';
import { multipartBody, prepareFile } from './multipart.js';
import { parseRetryAfter, retryDelayMs, type Clock } from './retry.js';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8787';
export const DEFAULT_TIMEOUT_MS = 600_000;
const DEFAULT_MAX_RETRIES = 2;

export interface BurrowOptions {
  /**
   * Base URL of the service; a path prefix is kept (`https://host/api` → `https://host/api/v1/…`).
   * Default: the `BURROW_BASE_URL` environment variable, else `http://127.0.0.1:8787`.
   */
  baseUrl?: string | undefined;
  /**
   * API key, sent as the `x-api-key` header and never included in error messages.
   * Default: the `BURROW_API_KEY` environment variable. Required: without either, the
   * constructor throws `ConfigurationError` with code `missing_api_key`.
   */
  apiKey?: string | undefined;
  /**
   * Timeout of each attempt, in milliseconds, from sending the request to the end of the
   * response body. Default: 600 000 (10 minutes, as the reference SDK). No environment variable.
   */
  timeoutMs?: number | undefined;
  /**
   * How many times a failed request may be retried (docs/errors.md says which failures are).
   * Default: 2. No environment variable.
   */
  maxRetries?: number | undefined;
  /** Extra headers sent with every request. Default: none. No environment variable. */
  headers?: Record<string, string> | undefined;
  /**
   * The undici dispatcher to send through (e.g. a `ProxyAgent`). Default: a keep-alive `Pool`
   * owned by the client and closed by `close()`; a dispatcher passed here is never closed by it.
   */
  dispatcher?: Dispatcher | undefined;
  /** Time and randomness for retry delays. Default: the real clock; tests inject their own. */
  clock?: Clock | undefined;
}

/** Per-call options, the last argument of every client method. */
export interface RequestOptions {
  /** Aborts the call, including a wait between retries; it then rejects with `AbortError`. */
  signal?: AbortSignal | undefined;
  /** Timeout of each attempt, in milliseconds. Default: the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
  /** Retries allowed for this call. Default: the client's `maxRetries`. */
  maxRetries?: number | undefined;
  /** Extra headers for this call, over the client's. Default: none. */
  headers?: Record<string, string> | undefined;
}

type Spec<K extends OperationId> = Operations[K];
/** The JSON body an operation takes, as sent on the wire. */
export type Body<K extends OperationId> =
  Spec<K> extends { readonly body: infer S extends z.ZodType } ? z.input<S> : never;
/** The query an operation takes, as typed values (the client turns them into strings). */
export type Query<K extends OperationId> =
  Spec<K> extends { readonly query: infer S extends z.ZodType }
    ? WithOptional<z.output<S>, OptionalKeys<z.input<S>> & keyof z.output<S>>
    : never;
/** Keys a caller may leave out: those the schema accepts undefined for (or fills a default). */
type OptionalKeys<T> = { [P in keyof T]-?: undefined extends T[P] ? P : never }[keyof T];
type WithOptional<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;
/**
 * A `stream` row's successful response: status, headers and the body not yet read. The attempt's
 * timeout ends once the headers are in; reading `body` is the caller's (destroy it to stop early;
 * the call's `signal` still aborts it).
 */
export interface StreamResponse {
  status: number;
  headers: Record<string, string>;
  body: Readable;
}
/** What an operation resolves to: the output of its response schema, or a `StreamResponse`. */
export type Result<K extends OperationId> =
  Spec<K> extends { readonly responseKind: 'stream' }
    ? StreamResponse
    : z.output<Spec<K>['response']>;

export interface RequestInput<K extends OperationId> {
  params?: Record<string, string>;
  query?: Query<K> | undefined;
  body?: Body<K> | undefined;
  /** The file part of a multipart body. */
  file?: UploadFilePart;
}

interface UploadFilePart {
  source: unknown;
  filename?: string | undefined;
  mediaType?: string | undefined;
}

/** `RequestInput` once the operation is no longer known statically. */
interface AnyInput {
  params?: Record<string, string>;
  query?: object | undefined;
  body?: Record<string, unknown> | undefined;
  file?: UploadFilePart;
}

const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) => sleep(ms, undefined, signal ? { signal } : undefined),
  random: () => Math.random(),
};

/** Errors meaning no connection was ever opened: nothing reached the server. */
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/** Errors of a connection that broke after it was opened. */
const BROKEN_CODES = new Set([
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
]);

/** The code of a transport failure, or undefined when `error` is not one. */
function networkCode(error: unknown): string | undefined {
  if (error instanceof errors.HTTPParserError) return error.code ?? error.name;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (CONNECT_CODES.has(code) || BROKEN_CODES.has(code))
    ? code
    : undefined;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

function checkTimeout(value: number): number {
  if (Number.isInteger(value) && value > 0 && value <= MAX_TIMER_MS) return value;
  throw new ConfigurationError('invalid_option', `timeoutMs must be an integer 1–${MAX_TIMER_MS}`);
}

function checkRetries(value: number): number {
  if (Number.isInteger(value) && value >= 0) return value;
  throw new ConfigurationError('invalid_option', 'maxRetries must be an integer ≥ 0');
}

const lowerKeys = (headers: Record<string, string> = {}) =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));

/** Replaces every secret and every `token=` query value with `[REDACTED]`. */
function redact(text: string, secrets: readonly string[]): string {
  let out = text.replace(/([?&]token=)[^&\s"'#\\]+/g, '$1[REDACTED]');
  for (const secret of secrets) if (secret) out = out.replaceAll(secret, '[REDACTED]');
  return out;
}

function parseBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function check(operation: string, schema: z.ZodType | undefined, value: unknown, at: Location) {
  const result = schema && wireParse(schema, value);
  if (result && !result.success) {
    throw new InvalidRequestError(operation, validationDetail(result.error, at, value));
  }
}

/**
 * The one path-parameter encoder: rejects values that are not strings, empty, `.` or `..`, and
 * percent-encodes everything else, `/` included, so a value is always exactly one segment.
 */
export function encodePathParam(operation: string, name: string, value: unknown): string {
  if (typeof value === 'string' && value !== '' && value !== '.' && value !== '..') {
    return encodeURIComponent(value);
  }
  throw new InvalidRequestError(operation, [
    {
      loc: ['path', name],
      msg: "Must be a non-empty string other than '.' and '..'",
      type: 'value_error',
      input: value,
    },
  ]);
}

function queryString(query: object | undefined): string {
  const entries = Object.entries(query ?? {}).filter(([, v]) => v !== undefined);
  const qs = new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString();
  return qs && `?${qs}`;
}

interface Prepared {
  op: OperationSpec;
  /** Path and query as sent. */
  path: string;
  /** Method and redacted path, for errors. */
  target: RequestTarget;
  headers: Record<string, string>;
  /** A fresh body for each attempt. */
  body: () => string | Readable | null;
  secrets: string[];
  maxRetries: number;
}

export class Core {
  readonly baseUrl: string;
  readonly #origin: string;
  readonly #basePath: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;
  readonly #maxRetries: number;
  readonly #headers: Record<string, string>;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #clock: Clock;
  #closed: Promise<void> | undefined;

  constructor(options: BurrowOptions = {}) {
    const apiKey = options.apiKey ?? process.env['BURROW_API_KEY'];
    if (!apiKey) {
      throw new ConfigurationError(
        'missing_api_key',
        'No API key: pass { apiKey } to new Burrow() or set the BURROW_API_KEY environment variable',
      );
    }
    const baseUrl = options.baseUrl ?? (process.env['BURROW_BASE_URL'] || DEFAULT_BASE_URL);
    const url = URL.canParse(baseUrl) ? new URL(baseUrl) : undefined;
    if (url?.protocol !== 'http:' && url?.protocol !== 'https:') {
      throw new ConfigurationError('invalid_option', 'baseUrl must be an http:// or https:// URL');
    }
    this.#origin = url.origin;
    this.#basePath = url.pathname.replace(/\/+$/, '');
    this.baseUrl = this.#origin + this.#basePath;
    this.#apiKey = apiKey;
    this.#timeoutMs = checkTimeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    this.#maxRetries = checkRetries(options.maxRetries ?? DEFAULT_MAX_RETRIES);
    this.#headers = lowerKeys(options.headers);
    this.#ownsDispatcher = !options.dispatcher;
    this.#dispatcher = options.dispatcher ?? new Pool(this.#origin);
    this.#clock = options.clock ?? systemClock;
  }

  /** Sends operation `id`: validate, send, retry, parse. */
  async request<K extends OperationId>(
    id: K,
    input: RequestInput<K>,
    opts: RequestOptions = {},
  ): Promise<Result<K>> {
    const req = await this.#prepare(operations[id], input as AnyInput, opts);
    const timeoutMs = checkTimeout(opts.timeoutMs ?? this.#timeoutMs);
    for (let retry = 0; ; retry++) {
      if (opts.signal?.aborted) {
        throw new AbortError(req.target.method, req.target.path, { cause: opts.signal.reason });
      }
      try {
        return (await this.#attempt(req, opts.signal, timeoutMs)) as Result<K>;
      } catch (error) {
        const delay =
          retry < req.maxRetries
            ? retryDelayMs(error, req.op.idempotent, retry, this.#clock.random())
            : undefined;
        if (delay === undefined) throw error;
        await this.#clock.sleep(delay, opts.signal).catch((reason: unknown) => {
          const cause: unknown = opts.signal?.reason ?? reason;
          throw new AbortError(req.target.method, req.target.path, { cause });
        });
      }
    }
  }

  /** Closes the client's own dispatcher (idempotent); later calls throw `ClientClosedError`. */
  close(): Promise<void> {
    this.#closed ??= this.#ownsDispatcher ? this.#dispatcher.close() : Promise.resolve();
    return this.#closed;
  }

  async #prepare(op: OperationSpec, input: AnyInput, opts: RequestOptions): Promise<Prepared> {
    if (this.#closed) throw new ClientClosedError();
    const operation = op.client.join('.');
    const params = input.params ?? {};
    check(operation, op.params, params, 'path');
    if (op.query) check(operation, op.query, input.query ?? {}, 'query');
    const route = op.path.replace(/\{(\w+)\}/g, (_, name: string) =>
      encodePathParam(operation, name, params[name]),
    );
    const path = this.#basePath + route + queryString(input.query);
    const headers: Record<string, string> = {
      accept: op.responseKind === 'stream' ? '*/*' : 'application/json',
      'x-api-key': this.#apiKey,
      ...this.#headers,
      ...lowerKeys(opts.headers),
    };
    const secrets = [this.#apiKey, headers['x-api-key'] ?? ''];
    let body: Prepared['body'] = () => null;
    let maxRetries = checkRetries(opts.maxRetries ?? this.#maxRetries);
    if (op.bodyKind !== 'none') check(operation, op.body, input.body ?? {}, 'body');
    if (op.bodyKind === 'json') {
      const json = JSON.stringify(input.body ?? {});
      headers['content-type'] = 'application/json';
      body = () => json;
    } else if (op.bodyKind === 'multipart') {
      const fields = Object.entries(input.body ?? {}).map(([k, v]) => [k, String(v)]);
      const { source, filename, mediaType } = input.file ?? {};
      const file = await prepareFile(
        operation,
        source,
        String(input.body?.path),
        filename,
        mediaType,
      );
      const multipart = multipartBody(Object.fromEntries(fields), file);
      headers['content-type'] = multipart.contentType;
      body = () => multipart.body;
      maxRetries = 0; // a stream cannot be replayed
    }
    const target = { method: op.method, path: redact(path, secrets) };
    return { op, path, target, headers, body, secrets, maxRetries };
  }

  async #attempt(req: Prepared, signal: AbortSignal | undefined, timeoutMs: number) {
    const { method, path: shownPath } = req.target;
    const t0 = performance.now();
    const ms = () => Math.round(performance.now() - t0);
    let result: Awaited<ReturnType<Core['exchange']>>;
    try {
      result = await this.exchange(req, signal, timeoutMs);
    } catch (error) {
      debug('client', () => `${method} ${shownPath} failed (${(error as Error).name}) ${ms()}ms`);
      throw error;
    }
    debug('client', () => `${method} ${shownPath} ${result.status} ${ms()}ms`);
    if ('stream' in result) return result.stream;
    return this.#parse(req, result.status, result.headers, result.text);
  }

  /** One exchange: the status, headers and body text (or stream); transport failures mapped. */
  private async exchange(
    req: Prepared,
    signal: AbortSignal | undefined,
    timeoutMs: number,
  ): Promise<
    | { status: number; headers: Record<string, string>; text: string }
    | { status: number; stream: StreamResponse }
  > {
    const { method, path: shownPath } = req.target;
    const timer = new AbortController();
    const timeout = setTimeout(() => timer.abort(), timeoutMs);
    let status: number;
    let headers: Record<string, string>;
    let text: string;
    try {
      const res = await this.#dispatcher.request({
        origin: this.#origin,
        path: req.path,
        method: req.op.method,
        headers: req.headers,
        body: req.body(),
        signal: signal ? AbortSignal.any([signal, timer.signal]) : timer.signal,
        // The timeout above covers the whole exchange; undici's own would cut long calls short.
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      status = res.statusCode;
      headers = Object.fromEntries(
        Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : `${v}`]),
      );
      if (req.op.responseKind === 'stream' && status >= 200 && status < 300) {
        return { status, stream: { status, headers, body: res.body } };
      }
      text = await res.body.text();
    } catch (error) {
      if (signal?.aborted) throw new AbortError(method, shownPath, { cause: signal.reason });
      if (timer.signal.aborted) throw new TimeoutError(method, shownPath, timeoutMs);
      const code = networkCode(error);
      const message = redact((error as Error | undefined)?.message ?? String(error), req.secrets);
      if (code !== undefined) {
        const reason = redact(`${code}: ${message}`, req.secrets);
        throw new ConnectionError(method, shownPath, CONNECT_CODES.has(code), reason, {
          cause: error,
        });
      }
      // close() raced this call: undici's pool refused it
      if (
        error instanceof errors.ClientClosedError ||
        error instanceof errors.ClientDestroyedError
      ) {
        throw new ClientClosedError({ cause: error });
      }
      // the peer or the pool ended the exchange some other way: a transport failure
      if (error instanceof errors.UndiciError && !(error instanceof errors.InvalidArgumentError)) {
        const uc = (error as { code?: string }).code ?? error.name;
        throw new ConnectionError(method, shownPath, false, `${uc}: ${message}`, { cause: error });
      }
      // an upload source's own error, or a request undici refused (an invalid header value)
      throw new RequestFailedError(method, shownPath, message, { cause: error });
    } finally {
      clearTimeout(timeout);
    }
    return { status, headers, text };
  }

  #parse(req: Prepared, status: number, headers: Record<string, string>, text: string): unknown {
    const { method, path } = req.target;
    if (status < 200 || status >= 300) {
      throw APIError.from({
        status,
        headers,
        body: parseBody(redact(text, req.secrets)),
        method,
        path,
        retryAfterMs: parseRetryAfter(headers['retry-after'], this.#clock.now()),
      });
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ContractError(method, path, status, redact(text, req.secrets), []);
    }
    const result = req.op.response.safeParse(json);
    if (result.success) return result.data;
    const shown = parseBody(redact(text, req.secrets));
    throw new ContractError(
      method,
      path,
      status,
      shown,
      validationDetail(result.error, 'body', shown),
    );
  }
}
