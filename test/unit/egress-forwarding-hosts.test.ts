/**
 * Forwarding headers a server behind a proxy may take for the request's host (`X-Forwarded-Host`,
 * `X-Original-Host`, `X-Host`, `Forwarded: host=`): every host they name passes the blocked
 * domains like `Host`, in a tunnel without TLS (egress/host-lines.ts) and on the proxied path
 * (egress/fronts/absolute-form.ts reads them with `forwardedHosts`). Attack4 reached a blocked
 * virtual host through an upstream that trusts them; attack5 through the rest of the family
 * (`X-Forwarded-Server`, `X-HTTP-Host-Override`, `X-Host-Override`, and the URL headers
 * `X-Original-URL`, `X-Rewrite-URL`), and through paths a server decodes (`/%2f%2fhost`) or reads
 * a URL in (`/http://host/`).
 */
import { describe, expect, it } from 'vitest';
import {
  forwardedHosts,
  HostLines,
  namedHost,
} from '../../src/server/sandbox/egress/host-lines.js';

const blocked = (name: string) =>
  name === 'blocked.test' || name.endsWith('.blocked.test') ? 'blocked.test' : undefined;

/** What a tunnel carrying `text` (in one read) is judged. */
const judged = (text: string) => new HostLines(blocked).feed(Buffer.from(text, 'latin1'));

describe('forwardedHosts', () => {
  it('reads each element of a list, and each host= of Forwarded, quoted or not', () => {
    expect(forwardedHosts('X-Forwarded-Host', ' a.test , blocked.test,,')).toEqual([
      'a.test',
      'blocked.test',
    ]);
    expect(
      forwardedHosts('Forwarded', 'for=1.2.3.4;host="blocked.test", host=b.test;proto=http'),
    ).toEqual(['blocked.test', 'b.test']);
    expect(forwardedHosts('forwarded', 'HOST = "x\\"y.test"')).toEqual(['x"y.test']);
    expect(forwardedHosts('Forwarded', 'for=1.2.3.4;proto=https')).toEqual([]);
  });

  it('reads the host of the URL in X-Original-URL and X-Rewrite-URL, where it names one', () => {
    expect(forwardedHosts('X-Original-URL', ' http://blocked.test/x ')).toEqual(['blocked.test']);
    expect(forwardedHosts('x-rewrite-url', '//blocked.test/')).toEqual(['blocked.test']);
    expect(forwardedHosts('X-Rewrite-URL', '/%2F%2fblocked.test')).toEqual(['blocked.test']);
    expect(forwardedHosts('X-Original-URL', '/path?u=http://blocked.test/')).toEqual([]);
    expect(forwardedHosts('X-Original-URL', '/only/a/path')).toEqual([]);
  });
});

describe('a path naming a host', () => {
  it('names it once its escapes are decoded, or where it holds a URL', () => {
    for (const target of [
      '//blocked.test/',
      '/%2f%2fblocked.test/',
      '/%2F%5Cblocked.test/x',
      '/%2fblocked.test/',
      '/http://blocked.test/',
      '//blocked.test%2Fx',
      '/HTTPS:%2f%2fblocked.test',
      'http:\\\\blocked.test',
    ]) {
      expect(namedHost(`GET ${target} HTTP/1.1`), target).toBe('blocked.test');
    }
    for (const target of [
      '/a/b',
      '/x?u=http://blocked.test/',
      '/a%2fb',
      '/%2e%2e/x',
      '/%252f%252fb.test',
    ]) {
      expect(namedHost(`GET ${target} HTTP/1.1`), target).toBeUndefined();
    }
    // a method is capitals: a line of text in a body that starts with a word is no request
    expect(namedHost('See //blocked.test')).toBeUndefined();
  });
});

describe('a tunnel without TLS', () => {
  const head = (field: string) => `GET / HTTP/1.1\r\nHost: ok.test\r\n${field}\r\n\r\n`;

  it('refuses a request whose forwarding header names a blocked host, in any case', () => {
    for (const field of [
      'X-Forwarded-Host: blocked.test',
      'x-forwarded-host: ok.test, www.blocked.test',
      'X-Original-Host: blocked.test:8080',
      'x-host: BLOCKED.test',
      'Forwarded: for=10.0.0.1;host=blocked.test',
      'forwarded: host="blocked.test";proto=http',
      'X-Forwarded-Server: blocked.test',
      'x-http-host-override: blocked.test',
      'X-Host-Override: ok.test, blocked.test',
      'X-Original-URL: http://blocked.test/',
      'x-rewrite-url: //blocked.test/',
    ]) {
      expect(judged(head(field)), field).toHaveProperty('blocked');
    }
  });

  it('passes one whose forwarding headers name other hosts', () => {
    for (const field of [
      'X-Forwarded-Host: ok.test',
      'Forwarded: for=blocked.test;host=ok.test',
      'X-Forwarded-For: blocked.test',
      'X-Original-URL: /blocked.test',
      'X-Forwarded-Server: ok.test',
    ]) {
      expect(judged(head(field)), field).toHaveProperty('pass');
    }
  });

  it('reads them cut across reads as in one', () => {
    const lines = new HostLines(blocked);
    const text = head('x-forwarded-host: blocked.test');
    const cut = text.indexOf('forwarded') + 3;
    expect(lines.feed(Buffer.from(text.slice(0, cut)))).toHaveProperty('pass');
    expect(lines.feed(Buffer.from(text.slice(cut)))).toHaveProperty('blocked');
  });
});

describe('a folded Host line longer than a line is read', () => {
  it('is refused, whole or cut: a lenient server may find a host past what is read', () => {
    const text = `GET / HTTP/1.1\r\nHost: ok.test\r\n ${'a'.repeat(9000)} blocked.test\r\n\r\n`;
    expect(judged(text)).toHaveProperty('blocked');
    const lines = new HostLines(blocked);
    const cut = text.indexOf('aaa') + 100;
    const first = lines.feed(Buffer.from(text.slice(0, cut)));
    const verdict = 'blocked' in first ? first : lines.feed(Buffer.from(text.slice(cut)));
    expect(verdict).toHaveProperty('blocked');
    // a long line that continues nothing is no host's
    expect(judged(`GET / HTTP/1.1\r\nX-Long: ${'a'.repeat(9000)}\r\n\r\n`)).toHaveProperty('pass');
  });
});
