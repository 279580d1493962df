/**
 * The shape of one row of the operations table (./operations.ts): what the client builds a method
 * from and the server a route, and the pieces rows share.
 */
import type { z } from 'zod';
import * as s from './schemas.js';

export type HttpMethod = 'GET' | 'POST' | 'DELETE';
export type BodyKind = 'none' | 'json' | 'multipart';
/**
 * How a successful response travels: `json` (the default when a row says nothing) is a JSON body
 * checked against `response`; `stream` is raw bytes (a download, a recording) handed over as they
 * arrive, with `response` unused for the body (give it `z.unknown()`).
 */
export type ResponseKind = 'json' | 'stream';

export interface OperationSpec {
  /** Group and method name on the client, e.g. `['instances', 'start']`. */
  readonly client: readonly [group: string, method: string];
  readonly method: HttpMethod;
  /** Path template with `{name}` parameters, relative to the base URL. */
  readonly path: string;
  readonly params?: z.ZodType;
  readonly query?: z.ZodType;
  readonly body?: z.ZodType;
  readonly bodyKind: BodyKind;
  readonly response: z.ZodType;
  /**
   * Absent means `json`. The server's generic route loop (src/server/http/app.ts) skips `stream` rows:
   * their owners register the route themselves, on the same method and path. The client's
   * `Core.request` resolves a `stream` row to a `StreamResponse` (src/client/core.ts).
   */
  readonly responseKind?: ResponseKind;
  /** True for burrow's own routes, not in docs/spec/API.md. Absent means a row of the spec. */
  readonly extension?: boolean;
  /** The status of a success; absent means 200 (a drain that has begun answers 202). */
  readonly successStatus?: 200 | 202;
  /**
   * Whether repeating the request after a lost response is harmless, so the client may retry it
   * automatically. Never true for `POST /v1/start`.
   */
  readonly idempotent: boolean;
}

/** A row without a request body. */
export const none = { bodyKind: 'none' } as const;
/** A row about one instance: `{instance_id}` in its path. */
export const inst = { params: s.InstancePath } as const;
