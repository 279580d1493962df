/**
 * A plain request through the egress proxy (absolute-form, `GET http://host/path`) is read
 * strictly before anything goes upstream (src/server/sandbox/egress/fronts/absolute-form.ts): a
 * `Host` header whose port does not parse (`blocked.test:x`, `:99999`, `:80:80`) is a 400, not a
 * header judged by the part before its colon or passed upstream unjudged. Inside a CONNECT tunnel
 * the same spellings got past `blocked_domains` once (issue 35); this is the proxied path's check.
 */
import type http from 'node:http';
import { describe, expect, it } from 'vitest';
import { requestTarget } from '../../src/server/sandbox/egress/fronts/absolute-form.js';
import { Refusal } from '../../src/server/sandbox/egress/refusal.js';

const request = (url: string, ...host: string[]) =>
  ({
    url,
    httpVersion: '1.1',
    rawHeaders: host.flatMap((h) => ['Host', h]),
  }) as unknown as http.IncomingMessage;

function refusal(req: http.IncomingMessage): Refusal {
  try {
    requestTarget(req);
  } catch (err) {
    if (err instanceof Refusal) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('requestTarget', () => {
  it('reads the target and the Host header of a well-formed request', () => {
    expect(requestTarget(request('http://allowed.test:8080/a?b', 'Blocked.Test.'))).toMatchObject({
      target: { host: 'allowed.test', port: 8080, path: '/a?b' },
      host: { host: 'blocked.test', port: 8080 },
    });
    expect(requestTarget(request('http://allowed.test/', '[::1]:81')).host).toEqual({
      host: '::1',
      port: 81,
    });
    expect(requestTarget(request('http://allowed.test/')).host).toBeUndefined();
  });

  it('refuses a Host header whose port does not parse, with a 400', () => {
    for (const host of ['blocked.test:x', 'blocked.test:99999', 'blocked.test:80:80', 'b:0']) {
      const r = refusal(request('http://allowed.test/', host));
      expect([r.status, r.code, r.message], host).toEqual([
        400,
        'bad_request',
        'malformed Host header',
      ]);
    }
  });

  it('refuses two Host headers, and a request that is not absolute-form', () => {
    expect(refusal(request('http://allowed.test/', 'a.test', 'b.test')).message).toBe(
      'more than one Host header',
    );
    expect(refusal(request('/path', 'a.test')).code).toBe('origin_form');
  });
});
