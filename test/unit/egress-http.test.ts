/** The proxy's HTTP wire helpers: request targets, Host headers, hop-by-hop headers. */
import { describe, expect, it } from 'vitest';
import {
  forwardHeaders,
  headerValues,
  parseAuthority,
  parseProxyTarget,
  plainResponse,
} from '../../src/server/sandbox/egress/proxy-http.js';

describe('parseAuthority', () => {
  it('reads CONNECT targets', () => {
    expect(parseAuthority('Example.com:443')).toEqual({ host: 'example.com', port: 443 });
    expect(parseAuthority('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(parseAuthority('127.0.0.1:1')).toEqual({ host: '127.0.0.1', port: 1 });
  });

  it('refuses malformed targets', () => {
    for (const bad of [
      'example.com',
      'example.com:',
      ':443',
      'a:0',
      'a:65536',
      'a:1x',
      '::1:443',
    ]) {
      expect(parseAuthority(bad), bad).toBeUndefined();
    }
    expect(parseAuthority('a b:80')).toBeUndefined();
    expect(parseAuthority('[::1:80')).toBeUndefined();
  });

  it('makes the port optional for Host headers', () => {
    expect(parseAuthority('Blocked.test.', 80)).toEqual({ host: 'blocked.test', port: 80 });
    expect(parseAuthority('[::1]', 80)).toEqual({ host: '::1', port: 80 });
  });
});

describe('parseProxyTarget', () => {
  it('reads absolute-form targets', () => {
    expect(parseProxyTarget('http://user:pw@Example.com:8080/a/b?x=1#frag')).toEqual({
      host: 'example.com',
      port: 8080,
      path: '/a/b?x=1',
    });
    expect(parseProxyTarget('http://[::1]')).toEqual({ host: '::1', port: 80, path: '/' });
    expect(parseProxyTarget('ws://h.test/socket')).toEqual({
      host: 'h.test',
      port: 80,
      path: '/socket',
    });
  });

  it('refuses origin-form and other schemes', () => {
    for (const bad of ['/', '*', 'https://a.test/', 'ftp://a.test/', 'http://', 'http://a b/']) {
      expect(parseProxyTarget(bad), bad).toBeUndefined();
    }
  });
});

describe('forwardHeaders', () => {
  const raw = [
    'Host',
    'a.test',
    'Connection',
    'keep-alive, X-Secret-Hop',
    'Keep-Alive',
    'timeout=5',
    'Proxy-Authorization',
    'Basic eA==',
    'Proxy-Connection',
    'keep-alive',
    'X-Secret-Hop',
    '1',
    'Transfer-Encoding',
    'chunked',
    'Upgrade',
    'websocket',
    'Expect',
    '100-continue',
    'Cookie',
    'a=1',
    'Cookie',
    'b=2',
  ];

  it('drops hop-by-hop, Connection-named and Proxy-* headers', () => {
    expect(forwardHeaders(raw)).toEqual(['Host', 'a.test', 'Cookie', 'a=1', 'Cookie', 'b=2']);
  });

  it('keeps what a protocol switch needs', () => {
    expect(forwardHeaders(raw, { upgrade: true })).toEqual([
      'Host',
      'a.test',
      'Upgrade',
      'websocket',
      'Cookie',
      'a=1',
      'Cookie',
      'b=2',
      'Connection',
      'Upgrade',
    ]);
  });

  it('finds every value of a header', () => {
    expect(headerValues(raw, 'cookie')).toEqual(['a=1', 'b=2']);
  });
});

describe('plainResponse', () => {
  it('is a complete response that closes', () => {
    const text = plainResponse(403, 'blocked_domain', 'x.test is blocked');
    const [head, body] = text.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(head).toContain('Connection: close');
    expect(head).toContain(`Content-Length: ${Buffer.byteLength(body!)}`);
    expect(body).toBe('burrow egress: blocked_domain: x.test is blocked\n');
  });
});
