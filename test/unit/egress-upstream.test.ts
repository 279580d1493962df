/**
 * The pure parts of the upstream proxy client (egress/upstream.ts) and the start schema's check of
 * `proxy.server`: what is read as which upstream, what is refused and why, the bypass list.
 */
import { describe, expect, it } from 'vitest';
import { proxyServerProblem, StartRequest } from '../../src/api/index.js';
import { openApiDocument } from '../../src/api/openapi.js';
import {
  bypasses,
  parseBypass,
  parseUpstreamServer,
  upstreamFromSettings,
  upstreamLabel,
} from '../../src/server/sandbox/egress/upstream.js';

describe('parseUpstreamServer', () => {
  it.each([
    ['http://proxy.example:3128', { scheme: 'http', host: 'proxy.example', port: 3128 }],
    ['proxy.example:8080', { scheme: 'http', host: 'proxy.example', port: 8080 }],
    ['https://PROXY.example', { scheme: 'https', host: 'proxy.example', port: 443 }],
    ['socks5://127.0.0.1:1080', { scheme: 'socks5', host: '127.0.0.1', port: 1080 }],
    ['socks5h://[::1]:9050/', { scheme: 'socks5', host: '::1', port: 9050 }],
  ])('reads %s', (server, expected) => {
    expect(parseUpstreamServer(server)).toEqual(expected);
    expect(proxyServerProblem(server)).toBeUndefined();
  });

  it.each([
    ['ftp://proxy.example:21', 'scheme ftp://'],
    ['socks4://proxy.example:1080', 'scheme socks4://'],
    ['http://u:p@proxy.example:3128', 'credentials'],
    ['http://proxy.example:3128/path', 'path'],
    ['http://', ''],
  ])('refuses %s', (server, why) => {
    const parsed = parseUpstreamServer(server);
    expect('error' in parsed).toBe(true);
    expect(proxyServerProblem(server)).toContain(why);
  });

  it('the start schema refuses a bad server and a password without a user', () => {
    const bad = StartRequest.safeParse({ proxy: { server: 'gopher://x:70' } });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues)).toContain('gopher://');
    const noUser = StartRequest.safeParse({ proxy: { server: 'http://x:1', password: 'p' } });
    expect(noUser.success).toBe(false);
    expect(StartRequest.safeParse({ proxy: { server: 'socks5://x:1' } }).success).toBe(true);
  });
});

describe('bypass and label', () => {
  it('a bypass entry matches its host and subdomains, and exact IPs', () => {
    const u = upstreamFromSettings({
      server: 'http://p:1',
      bypass: '.internal.test, *.corp.example;localhost 10.0.0.1',
    });
    if ('error' in u) throw new Error(u.error);
    expect(parseBypass('.a.test, *.b.test')).toEqual(['a.test', 'b.test']);
    expect(bypasses(u, 'internal.test')).toBe(true);
    expect(bypasses(u, 'x.y.internal.test')).toBe(true);
    expect(bypasses(u, 'notinternal.test')).toBe(false);
    expect(bypasses(u, 'WWW.corp.example.')).toBe(true);
    expect(bypasses(u, '10.0.0.1')).toBe(true);
    expect(bypasses(u, '10.0.0.2')).toBe(false);
    expect(bypasses(u, 'example.com')).toBe(false);
  });

  it('the label never carries credentials', () => {
    const u = upstreamFromSettings({ server: 'socks5://[::1]:9', username: 'me', password: 'pw' });
    if ('error' in u) throw new Error(u.error);
    expect(upstreamLabel(u)).toBe('socks5://[::1]:9');
  });
});

describe('/openapi.json', () => {
  it('documents proxy in the start request and the instance, without credentials in the latter', () => {
    const doc = JSON.stringify(openApiDocument());
    for (const field of ['"proxy"', '"bypass"', '"username"', '"password"']) {
      expect(doc).toContain(field);
    }
    // the instance answers the server only
    expect(doc).toContain('"proxy":{"type":"object","properties":{"server":{"type":"string"}}');
  });
});
