/**
 * The client's error hierarchy (docs/architecture.md): one base class with a stable string `code`,
 * one class per HTTP status family made by one factory, separate transport failures, and a contract
 * error for a 2xx body that does not match its schema. docs/errors.md lists every class; a unit
 * test keeps it complete. Messages never contain the API key or a `token=` value.
 */
import { z } from 'zod';
import type { ValidationErrorItem } from '../api/index.js';

/** Every `code` a client error can carry. */
export const ERROR_CODES = [
  'missing_api_key',
  'invalid_option',
  'client_closed',
  'invalid_request',
  'api_error',
  'bad_request',
  'authentication_failed',
  'not_found',
  'payload_too_large',
  'validation_failed',
  'rate_limited',
  'server_error',
  'connection_failed',
  'timeout',
  'aborted',
  'contract_violation',
  'request_failed',
] as const;
/** Codes of the bridge's own errors (src/session/errors.ts), part of the same hierarchy. */
export const SESSION_ERROR_CODES = [
  'peer_missing',
  'start_failed',
  'start_timeout',
  'auth_state_not_found',
  'auth_state_ambiguous',
  'session_stopped',
  'reconnect_failed',
  'handoff_expired',
  'handoff_cancelled',
] as const;
export type BurrowErrorCode = (typeof ERROR_CODES)[number] | (typeof SESSION_ERROR_CODES)[number];

/** Base class of every error the client and the bridge throw; switch on `code` or use `instanceof`. */
export abstract class BurrowError extends Error {
  readonly code: BurrowErrorCode;

  constructor(code: BurrowErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A client or call option is missing or invalid (thrown before any request). */
export class ConfigurationError extends BurrowError {
  declare readonly code: 'missing_api_key' | 'invalid_option';

  constructor(code: 'missing_api_key' | 'invalid_option', message: string) {
    super(code, message);
  }
}

/** The `Burrow` client was closed; no request was sent. */
export class ClientClosedError extends BurrowError {
  declare readonly code: 'client_closed';

  constructor(options?: ErrorOptions) {
    super('client_closed', 'This Burrow client is closed', options);
  }
}

const formatItems = (items: readonly ValidationErrorItem[]): string =>
  items.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; ');

/**
 * The input failed the operation's request schema (or a path parameter is empty, `.` or `..`);
 * no request was sent. `issues` has the same shape as a server's 422 `detail`.
 */
export class InvalidRequestError extends BurrowError {
  declare readonly code: 'invalid_request';

  constructor(
    /** The client method, e.g. `instances.start`. */
    readonly operation: string,
    readonly issues: ValidationErrorItem[],
    options?: ErrorOptions,
  ) {
    super('invalid_request', `${operation}: invalid request: ${formatItems(issues)}`, options);
  }
}

/** Where a request went: for messages and for the error's fields. */
export interface RequestTarget {
  method: string;
  /** Path and query string, with any `token=` value redacted. */
  path: string;
}

export type APIErrorCode =
  | 'api_error'
  | 'bad_request'
  | 'authentication_failed'
  | 'not_found'
  | 'payload_too_large'
  | 'validation_failed'
  | 'rate_limited'
  | 'server_error';

export interface APIErrorInit extends RequestTarget {
  status: number;
  headers: Record<string, string>;
  /** The response body: parsed JSON, or the text when it is not JSON. Already redacted. */
  body: unknown;
  /** From `Retry-After`, when the response had a valid one. */
  retryAfterMs: number | undefined;
}

const ValidationDetail = z.array(
  z.looseObject({
    loc: z.array(z.union([z.string(), z.number()])),
    msg: z.string(),
    type: z.string(),
  }),
);

function headerValue(headers: Record<string, string>, name: string): string | undefined {
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
  return undefined;
}

function detailOf(body: unknown): unknown {
  return body !== null && typeof body === 'object' && 'detail' in body ? body.detail : body;
}

function detailText(body: unknown): string {
  const detail = detailOf(body);
  if (typeof detail === 'string') return detail.slice(0, 500);
  const items = ValidationDetail.safeParse(detail);
  return items.success ? formatItems(items.data) : '';
}

/** The service answered with a non-2xx status. Use `APIError.from` to get the right subclass. */
export class APIError extends BurrowError implements RequestTarget {
  declare readonly code: APIErrorCode;
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: unknown;
  readonly method: string;
  readonly path: string;
  readonly retryAfterMs: number | undefined;
  /**
   * The server's own error code from the `x-burrow-error` header (a burrow server sends one per
   * row of docs/server-errors.md, e.g. `instance_not_found`); undefined when it sent none.
   */
  readonly serverCode: string | undefined;

  constructor(init: APIErrorInit, code: APIErrorCode = 'api_error') {
    const text = detailText(init.body);
    super(
      code,
      `${init.method} ${init.path} failed with status ${init.status}${text && `: ${text}`}`,
    );
    this.status = init.status;
    this.headers = init.headers;
    this.body = init.body;
    this.method = init.method;
    this.path = init.path;
    this.retryAfterMs = init.retryAfterMs;
    this.serverCode = headerValue(init.headers, 'x-burrow-error');
  }

  /** The one factory: the subclass for the status, or `APIError` itself. */
  static from(init: APIErrorInit): APIError {
    switch (init.status) {
      case 400:
        return new BadRequestError(init);
      case 401:
        return new AuthenticationError(init);
      case 404:
        return new NotFoundError(init);
      case 413:
        return new PayloadTooLargeError(init);
      case 422:
        return new ValidationError(init);
      case 429:
        return new RateLimitError(init);
      default:
        return init.status >= 500 ? new ServerError(init) : new APIError(init);
    }
  }
}

/** 400: not allowed for the instance's type or current state (e.g. "Instance is paused"). */
export class BadRequestError extends APIError {
  declare readonly code: 'bad_request';
  constructor(init: APIErrorInit) {
    super(init, 'bad_request');
  }
}

/** 401: missing or wrong API key. */
export class AuthenticationError extends APIError {
  declare readonly code: 'authentication_failed';
  constructor(init: APIErrorInit) {
    super(init, 'authentication_failed');
  }
}

/** 404: unknown instance, notebook, cell or auth state. */
export class NotFoundError extends APIError {
  declare readonly code: 'not_found';
  constructor(init: APIErrorInit) {
    super(init, 'not_found');
  }
}

/** 413: the upload is larger than the server accepts. */
export class PayloadTooLargeError extends APIError {
  declare readonly code: 'payload_too_large';
  constructor(init: APIErrorInit) {
    super(init, 'payload_too_large');
  }
}

/** 422: the server rejected the input; `detail` is the parsed FastAPI-shaped list. */
export class ValidationError extends APIError {
  declare readonly code: 'validation_failed';
  readonly detail: ValidationErrorItem[];
  constructor(init: APIErrorInit) {
    super(init, 'validation_failed');
    const items = ValidationDetail.safeParse(detailOf(init.body));
    this.detail = items.success ? items.data : [];
  }
}

/** 429: the server is at capacity; `retryAfterMs` says when to try again, if it said. */
export class RateLimitError extends APIError {
  declare readonly code: 'rate_limited';
  constructor(init: APIErrorInit) {
    super(init, 'rate_limited');
  }
}

/** 5xx. */
export class ServerError extends APIError {
  declare readonly code: 'server_error';
  constructor(init: APIErrorInit) {
    super(init, 'server_error');
  }
}

/** The connection could not be opened, or broke before a full response arrived. */
export class ConnectionError extends BurrowError implements RequestTarget {
  declare readonly code: 'connection_failed';

  constructor(
    readonly method: string,
    readonly path: string,
    /** True when no connection could be opened, so the request certainly did not reach the server. */
    readonly connectFailed: boolean,
    reason: string,
    options: ErrorOptions,
  ) {
    super('connection_failed', `${method} ${path}: connection failed: ${reason}`, options);
  }
}

/** No complete response within `timeoutMs` (per attempt). */
export class TimeoutError extends BurrowError implements RequestTarget {
  declare readonly code: 'timeout';

  constructor(
    readonly method: string,
    readonly path: string,
    readonly timeoutMs: number,
  ) {
    super('timeout', `${method} ${path}: no response within ${timeoutMs} ms`);
  }
}

/** The caller's `signal` aborted the call (its reason is the `cause`). */
export class AbortError extends BurrowError implements RequestTarget {
  declare readonly code: 'aborted';

  constructor(
    readonly method: string,
    readonly path: string,
    options: ErrorOptions,
  ) {
    super('aborted', `${method} ${path}: aborted`, options);
  }
}

/**
 * The request failed for a reason that is neither an HTTP answer nor the network: the upload
 * source raised an error while it was being sent, or the HTTP library refused the request (an
 * invalid header value). `cause` is the original error.
 */
export class RequestFailedError extends BurrowError implements RequestTarget {
  declare readonly code: 'request_failed';

  constructor(
    readonly method: string,
    readonly path: string,
    reason: string,
    options: ErrorOptions,
  ) {
    super('request_failed', `${method} ${path}: request failed: ${reason}`, options);
  }
}

/** A 2xx response whose body is not JSON or does not match the operation's response schema. */
export class ContractError extends BurrowError implements RequestTarget {
  declare readonly code: 'contract_violation';

  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    /** The response body (parsed JSON or text), redacted. */
    readonly body: unknown,
    /** What did not match, `loc` starting at `body`; empty when the body is not JSON. */
    readonly issues: ValidationErrorItem[],
  ) {
    const what = issues.length ? formatItems(issues) : 'the body is not JSON';
    super(
      'contract_violation',
      `${method} ${path} returned ${status} with a body that breaks the API contract: ${what}`,
    );
  }
}
