import { describe, expect, it } from 'vitest';
import { APIError, ConnectionError } from '../../src/client/index.js';
import {
  BACKOFF_MAX_MS,
  RETRY_AFTER_CAP_MS,
  backoffMs,
  parseRetryAfter,
  retryDelayMs,
} from '../../src/client/retry.js';

const NOW = Date.parse('2025-06-01T12:00:00Z');

const apiError = (status: number, retryAfterMs?: number) =>
  APIError.from({ status, headers: {}, body: {}, method: 'GET', path: '/x', retryAfterMs });
const connError = (connectFailed: boolean) =>
  new ConnectionError('GET', '/x', connectFailed, 'ECONNRESET', { cause: undefined });

describe('parseRetryAfter', () => {
  it('reads delta-seconds', () => {
    expect(parseRetryAfter('3', NOW)).toBe(3000);
    expect(parseRetryAfter(' 0 ', NOW)).toBe(0);
    expect(parseRetryAfter('1.5', NOW)).toBe(1500);
  });

  it('reads an HTTP date relative to the injected clock; a past date means now', () => {
    expect(parseRetryAfter('Sun, 01 Jun 2025 12:00:10 GMT', NOW)).toBe(10_000);
    expect(parseRetryAfter(new Date(NOW + 2500).toUTCString(), NOW)).toBe(2000); // 1 s resolution
    expect(parseRetryAfter('Sun, 01 Jun 2025 11:00:00 GMT', NOW)).toBe(0);
  });

  it('ignores absent, negative and unparsable values', () => {
    for (const value of [undefined, '', '-1', 'soon', '1e3']) {
      expect(parseRetryAfter(value, NOW), String(value)).toBeUndefined();
    }
  });
});

describe('backoffMs', () => {
  it('doubles from 0.5 s and stops growing at 8 s (random 0.5 = no jitter)', () => {
    expect([0, 1, 2, 3, 4, 5, 9].map((n) => backoffMs(n, 0.5))).toEqual([
      500, 1000, 2000, 4000, 8000, 8000, 8000,
    ]);
  });

  it('jitters by at most ±25 %', () => {
    expect(backoffMs(0, 0)).toBe(375);
    expect(backoffMs(0, 0.999_999)).toBe(625);
    expect(backoffMs(10, 0)).toBe(BACKOFF_MAX_MS * 0.75);
    expect(backoffMs(10, 0.999_999)).toBe(BACKOFF_MAX_MS * 1.25);
    for (let i = 0; i < 200; i++) {
      const ms = backoffMs(2, Math.random());
      expect(ms).toBeGreaterThanOrEqual(1500);
      expect(ms).toBeLessThanOrEqual(2500);
    }
  });
});

describe('retryDelayMs', () => {
  it('retries 408, 429 and 5xx on idempotent operations only', () => {
    for (const status of [408, 429, 500, 502, 503, 504]) {
      expect(retryDelayMs(apiError(status), true, 1, 0.5), String(status)).toBe(1000);
      expect(retryDelayMs(apiError(status), false, 1, 0.5), String(status)).toBeUndefined();
    }
  });

  it('never retries other statuses', () => {
    for (const status of [400, 401, 403, 404, 409, 413, 422]) {
      expect(retryDelayMs(apiError(status), true, 0, 0.5), String(status)).toBeUndefined();
    }
  });

  it('waits what Retry-After says, up to the cap; beyond it, does not retry', () => {
    expect(retryDelayMs(apiError(503, 2000), true, 0, 0.5)).toBe(2000);
    expect(retryDelayMs(apiError(429, 0), true, 0, 0.5)).toBe(0);
    expect(retryDelayMs(apiError(429, RETRY_AFTER_CAP_MS), true, 0, 0.5)).toBe(RETRY_AFTER_CAP_MS);
    expect(retryDelayMs(apiError(429, RETRY_AFTER_CAP_MS + 1), true, 0, 0.5)).toBeUndefined();
  });

  it('retries a failed connect for any operation, a broken connection only if idempotent', () => {
    expect(retryDelayMs(connError(true), false, 2, 0.5)).toBe(2000);
    expect(retryDelayMs(connError(false), true, 2, 0.5)).toBe(2000);
    expect(retryDelayMs(connError(false), false, 2, 0.5)).toBeUndefined();
  });

  it('does not retry anything else', () => {
    expect(retryDelayMs(new Error('boom'), true, 0, 0.5)).toBeUndefined();
  });
});
