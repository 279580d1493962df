/**
 * The `Host` rule inside a non-TLS tunnel (egress/host-lines.ts): every line naming a host is
 * checked before it passes, whichever request of the tunnel it is in and however it is cut.
 */
import { describe, expect, it } from 'vitest';
import { blockedDomainMatcher } from '../../src/server/sandbox/egress/policy.js';
import { HostLines, MAX_LINE, namedHost } from '../../src/server/sandbox/egress/host-lines.js';

const blocked = blockedDomainMatcher(['blocked.test']);
const b = (s: string) => Buffer.from(s, 'latin1');

/** Feed `chunks` in order: what passed, and the blocked host if one ended it. */
function run(chunks: string[], end = true): { passed: string; blocked?: string } {
  const lines = new HostLines(blocked);
  let passed = '';
  for (const c of [
    ...chunks.map((c) => () => lines.feed(b(c))),
    ...(end ? [() => lines.end()] : []),
  ]) {
    const v = c();
    if ('blocked' in v) return { passed, blocked: v.blocked };
    passed += v.pass.toString('latin1');
  }
  return { passed };
}

describe('namedHost', () => {
  it('reads Host headers and absolute-form request lines', () => {
    expect(namedHost('Host: blocked.test')).toBe('blocked.test');
    expect(namedHost('host:WWW.Blocked.Test.:8080')).toBe('www.blocked.test');
    expect(namedHost('HOST : [::1]:80')).toBe('::1');
    expect(namedHost('GET http://user@blocked.test:81/x HTTP/1.1\r')).toBe('blocked.test');
    expect(namedHost('GET /x HTTP/1.1\r')).toBeUndefined();
    expect(namedHost('X-Host: blocked.test')).toBeUndefined();
  });
});

describe('HostLines', () => {
  it('refuses a blocked Host in the first request, before its line passes', () => {
    const r = run(['GET / HTTP/1.1\r\nHost: blocked.test\r\n\r\n']);
    expect(r.blocked).toBe('blocked.test');
    expect(r.passed).toBe('');
  });

  it('refuses it in a later request of the same tunnel', () => {
    const ok = 'GET / HTTP/1.1\r\nHost: ok.test\r\n\r\n';
    const r = run([ok, 'GET /2 HTTP/1.1\r\nHost: a.blocked.test\r\n\r\n']);
    expect(r.blocked).toBe('a.blocked.test');
    expect(r.passed).toBe(ok);
  });

  it('refuses a line cut anywhere before its end passes', () => {
    const text = 'GET / HTTP/1.1\r\nHost: blocked.test\r\n\r\n';
    for (let cut = 1; cut < text.length; cut++) {
      const r = run([text.slice(0, cut), text.slice(cut)]);
      expect(r.blocked, String(cut)).toBe('blocked.test');
      expect(r.passed, String(cut)).not.toMatch(/blocked\.test[\r\n]/);
    }
  });

  it('holds nothing back: bytes without a line end pass at once', () => {
    expect(new HostLines(blocked).feed(b('ping'))).toEqual({ pass: b('ping') });
    const lines = new HostLines(blocked);
    expect(lines.feed(b('Host: blo'))).toEqual({ pass: b('Host: blo') });
    expect(lines.feed(b('cked.test\r\n'))).toEqual({ blocked: 'blocked.test' });
  });

  it('ends a line at CR alone too', () => {
    expect(run(['GET / HTTP/1.1\rHost: blocked.test\rX: y\r']).blocked).toBe('blocked.test');
  });

  it('checks the last line at the end, and absolute request lines', () => {
    expect(run(['x\r\nHost: blocked.test']).blocked).toBe('blocked.test');
    expect(run(['GET http://blocked.test/ HTTP/1.1\r\n\r\n']).blocked).toBe('blocked.test');
  });

  it('passes everything else, bytes unchanged', () => {
    const text = 'GET / HTTP/1.1\r\nHost: ok.test\r\n\r\nbody\nhost: fine.test\n\x00\xff';
    expect(run([text.slice(0, 7), text.slice(7)])).toEqual({ passed: text });
  });

  it('refuses an overlong line that starts like a Host line; passes other long lines whole', () => {
    const long = 'Host: ' + 'a'.repeat(MAX_LINE + 10);
    expect(run([long], false).blocked).toMatch(/naming a host/);
    const data = 'x'.repeat(MAX_LINE + 10);
    // the rest of that line is not a line start: "Host: blocked.test" inside it passes
    expect(run([data, 'Host: blocked.test\nok\n'])).toEqual({
      passed: `${data}Host: blocked.test\nok\n`,
    });
  });
});
