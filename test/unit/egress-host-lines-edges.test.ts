/**
 * The `Host` rule inside a non-TLS tunnel (egress/host-lines.ts) at its edges: which first bytes
 * start a line that may name a host (any capital a method begins with, `h` of `host:`), the exact
 * `MAX_LINE` bound however the line is cut, a tunnel that ends cleanly, and a `Host` whose port
 * does not parse, which servers still read as the host before it (nginx serves
 * `Host: blocked.test:x` as `blocked.test`).
 */
import { describe, expect, it } from 'vitest';
import { blockedDomainMatcher } from '../../src/server/sandbox/egress/policy.js';
import { HostLines, MAX_LINE, namedHost } from '../../src/server/sandbox/egress/host-lines.js';

const blocked = blockedDomainMatcher(['blocked.test']);

/** Feed `chunks` in order, then end: the blocked verdict if one came, else all that passed. */
function run(chunks: string[]): { passed: string } | { blocked: string } {
  const lines = new HostLines(blocked);
  let passed = '';
  for (const c of chunks) {
    const v = lines.feed(Buffer.from(c, 'latin1'));
    if ('blocked' in v) return v;
    passed += v.pass.toString('latin1');
  }
  const v = lines.end();
  return 'blocked' in v ? v : { passed: passed + v.pass.toString('latin1') };
}

describe('lines that may name a host', () => {
  it.each(['ACL', 'GET', 'ZAP'])('a request line of method %s', (method) => {
    expect(run([`${method} http://blocked.test/ HTTP/1.1\r\n`])).toEqual({
      blocked: 'blocked.test',
    });
  });

  it.each(['Host: blocked.test', 'host: blocked.test', 'HOST:blocked.test'])('%s', (line) => {
    expect(run([`GET / HTTP/1.1\r\n${line}\r\n\r\n`])).toEqual({ blocked: 'blocked.test' });
  });

  it('a tunnel of allowed lines passes whole, its last line too', () => {
    const text = 'GET / HTTP/1.1\r\nHost: ok.test\r\n\r\nHost: fine.test';
    expect(run([text])).toEqual({ passed: text });
  });
});

describe('a Host whose port does not parse', () => {
  it.each(['blocked.test:x', 'blocked.test:99999', 'blocked.test:80:80', 'www.blocked.test:'])(
    'Host: %s is judged by the host before it',
    (authority) => {
      expect(() => namedHost(`Host: ${authority}`)).not.toThrow();
      expect(run([`GET / HTTP/1.1\r\nHost: ${authority}\r\n\r\n`])).toEqual({
        blocked: expect.stringContaining('blocked.test') as unknown as string,
      });
    },
  );

  it('and one naming an allowed host passes', () => {
    const text = 'GET / HTTP/1.1\r\nHost: ok.test:x\r\n\r\n';
    expect(run([text])).toEqual({ passed: text });
  });
});

describe(`the ${MAX_LINE}-byte bound`, () => {
  const hostLine = (n: number) => `Host: ${'a'.repeat(n - 'Host: '.length)}`;
  const long = { blocked: `a line of more than ${MAX_LINE} bytes naming a host` };

  it('a naming line of exactly the bound is read whole; one byte more is refused', () => {
    expect(run([`${hostLine(MAX_LINE)}\r\n`])).toEqual({ passed: `${hostLine(MAX_LINE)}\r\n` });
    expect(run([`${hostLine(MAX_LINE + 1)}\r\n`])).toEqual(long);
  });

  it('counts a line across the chunks it comes in', () => {
    const line = hostLine(MAX_LINE + 1);
    expect(
      run([line.slice(0, 100), line.slice(100, MAX_LINE - 100), line.slice(MAX_LINE - 100)]),
    ).toEqual(long);
  });

  it('lets long lines pass that cannot name a host', () => {
    // a lower-case method is no method: such a line is body text, whatever follows it
    const body = `get http://blocked.test/${'x'.repeat(MAX_LINE)}\r\n`;
    expect(run([body])).toEqual({ passed: body });
    const spaced = ` Host: ${'x'.repeat(MAX_LINE)}`;
    expect(run([spaced])).toEqual({ passed: spaced });
  });
});

describe('a Host followed by a path, query or fragment', () => {
  // a server that reads the Host header as a URL's authority serves what comes before them
  it.each([
    'blocked.test/x',
    'blocked.test?x',
    'blocked.test#x',
    'blocked.test\\x',
    'blocked.test:80/x',
    'blocked.test/x@ok.test',
    'u@blocked.test/x',
  ])('Host: %s is judged by the host before it', (value) => {
    expect(namedHost(`Host: ${value}`)).toBe('blocked.test');
    expect(run([`GET / HTTP/1.1\r\nHost: ${value}\r\n\r\n`])).toEqual({
      blocked: expect.stringContaining('blocked.test') as unknown as string,
    });
  });

  it('and an allowed host with a path passes', () => {
    const text = 'GET / HTTP/1.1\r\nHost: ok.test/blocked.test\r\n\r\n';
    expect(run([text])).toEqual({ passed: text });
  });
});

describe('a Host spelled as a URL parser or a lenient server would still read it', () => {
  it.each([
    ['blocked.test;', 'blocked.test'],
    ['blocked.test,x', 'blocked.test'],
    ['blocked.test\u0000', 'blocked.test'],
    ['blocked%2etest', 'blocked.test'],
    ['blocked%2Etest%2fx', 'blocked.test'],
  ])('Host: %j is judged as %s', (value, host) => {
    expect(namedHost(`Host: ${value}`)).toBe(host);
    expect(run([`GET / HTTP/1.1\r\nHost: ${value}\r\n\r\n`])).toEqual({
      blocked: expect.stringContaining('blocked') as unknown as string,
    });
  });

  it('reads the line as UTF-8: an ideographic full stop is a dot', () => {
    // the bytes as they come through the tunnel, read one byte to a character
    const line = Buffer.from('Host: blocked\u3002test', 'utf8').toString('latin1');
    expect(namedHost(line)).toBe('blocked.test');
    const bytes = Buffer.from('GET / HTTP/1.1\r\nHost: blocked\u3002test\r\n\r\n', 'utf8');
    expect(run([bytes.toString('latin1')])).toEqual({
      blocked: expect.stringContaining('blocked') as unknown as string,
    });
  });
});

describe('a Host header folded onto the next line (obs-fold)', () => {
  it('is judged by every word of its continuation', () => {
    for (const fold of [' ', '\t', '  \t ']) {
      const text = `GET / HTTP/1.1\r\nHost: ok.test\r\n${fold}blocked.test\r\n\r\n`;
      expect(run([text]), JSON.stringify(fold)).toEqual({ blocked: 'blocked.test' });
    }
    expect(run(['GET / HTTP/1.1\nHost: ok.test\n x blocked.test:81\n\n'])).toEqual({
      blocked: 'blocked.test',
    });
  });

  it('and only a Host header: a continuation of another, or of nothing, passes', () => {
    for (const text of [
      'GET / HTTP/1.1\r\nX-Note: a\r\n blocked.test\r\n\r\n',
      ' blocked.test\r\n',
      'GET / HTTP/1.1\r\nHost: ok.test\r\n ok2.test\r\n\r\n',
    ]) {
      expect(run([text]), text).toEqual({ passed: text });
    }
  });
});
