/**
 * Retry policy (docs/architecture.md), pure so tests assert delays without sleeping.
 *
 * - A failed connect (nothing reached the server) is retried for every operation with a
 *   replayable body, `POST /v1/start` included.
 * - A connection that broke later, 408, 429 and 5xx are retried only for operations whose table
 *   row says `idempotent: true`.
 * - `Retry-After` (seconds or HTTP date) is honoured up to `RETRY_AFTER_CAP_MS`; a longer wait is
 *   not retried at all: the error is thrown at once and carries `retryAfterMs`.
 * - Otherwise exponential backoff: min(0.5 s × 2^n, 8 s), jittered ±25 %.
 */
import { APIError, ConnectionError } from './errors.js';

export const RETRY_AFTER_CAP_MS = 60_000;
const BACKOFF_BASE_MS = 500;
export const BACKOFF_MAX_MS = 8_000;

/** Time and randomness, injectable so tests control them. */
export interface Clock {
  /** Milliseconds since the epoch (to resolve an HTTP-date `Retry-After`). */
  now(): number;
  /** Resolves after `ms` milliseconds; rejects when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Uniform in [0, 1): the jitter. */
  random(): number;
}

/** `Retry-After` in milliseconds, or undefined when absent or unparsable. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  // All three HTTP-date forms start with the day name; Date.parse alone accepts e.g. "-1".
  const date = /^(mon|tue|wed|thu|fri|sat|sun)/i.test(text) ? Date.parse(text) : NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The backoff before retry number `retry` (0-based), given a random number in [0, 1). */
export function backoffMs(retry: number, random: number): number {
  const base = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** retry);
  return Math.round(base * (0.75 + 0.5 * random));
}

/** 501 is a server without the feature (keys without cluster mode): asking again cannot help. */
const RETRY_STATUSES = (status: number) =>
  status === 408 || status === 429 || (status >= 500 && status !== 501);

/** How long to wait before retrying after `error`, or undefined if it must not be retried. */
export function retryDelayMs(
  error: unknown,
  idempotent: boolean,
  retry: number,
  random: number,
): number | undefined {
  if (error instanceof ConnectionError) {
    return error.connectFailed || idempotent ? backoffMs(retry, random) : undefined;
  }
  if (!(error instanceof APIError) || !idempotent || !RETRY_STATUSES(error.status)) {
    return undefined;
  }
  if (error.retryAfterMs === undefined) return backoffMs(retry, random);
  return error.retryAfterMs <= RETRY_AFTER_CAP_MS ? error.retryAfterMs : undefined;
}
