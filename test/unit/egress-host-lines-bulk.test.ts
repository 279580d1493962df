/**
 * The tunnel's Host rule reads the complete lines of a socket read at once (egress/host-lines.ts):
 * whatever the cut of the stream into reads, it finds the same blocked host as reading it line by
 * line, a `Host` line's continuations included; its work per read is a scan, not a step per line;
 * a read holding more lines that name a host than any HTTP would is refused; and a request target
 * that a URL parser resolves to another host (`//host/`, `/\host`) names that host.
 */
import { describe, expect, it } from 'vitest';
import { blockedDomainMatcher } from '../../src/server/sandbox/egress/policy.js';
import {
  HostLines,
  MAX_NAMING_LINES,
  namedHost,
} from '../../src/server/sandbox/egress/host-lines.js';

const blocked = blockedDomainMatcher(['blocked.test']);

/** The verdict of feeding `stream` cut at `cuts`: the blocked host, or null once all passed. */
function verdict(stream: string, cuts: number[]): string | null {
  const lines = new HostLines(blocked);
  const bytes = Buffer.from(stream, 'latin1');
  let from = 0;
  for (const at of [...cuts, bytes.length]) {
    const v = lines.feed(bytes.subarray(from, at));
    if ('blocked' in v) return v.blocked;
    from = at;
  }
  const v = lines.end();
  return 'blocked' in v ? v.blocked : null;
}

/** A pseudo-random generator (the same streams every run). */
function rng(seed: number) {
  let s = seed;
  return (n: number) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
}

const PIECES = [
  'GET / HTTP/1.1\r\n',
  'Host: allowed.test\r\n',
  'Host: blocked.test\r\n',
  'host:\tBLOCKED.test.  \n',
  '\r\n',
  '\n',
  '\r',
  ' blocked.test\r\n', // a continuation: blocking only right after a Host line
  '\t x blocked.test\n',
  'X-Other: blocked.test\r\n',
  'get http://blocked.test/ HTTP/1.1\r\n', // a lowercase method: not read
  'GET http://blocked.test/ HTTP/1.1\r\n',
  'GET //blocked.test/x HTTP/1.1\r\n',
  'hello\n',
  'body bytes ',
  'Hos',
  't: blocked.test\n',
  'upgrade: websocket\r\n',
  'Upgrade: h2c\r\n',
  'PRI * HTTP/2.0\r\n',
];

describe('reads cut anywhere', () => {
  it('find what reading line by line finds (byte by byte is line by line)', () => {
    const next = rng(35);
    let disagreements = 0;
    let blockedSeen = 0;
    for (let n = 0; n < 400; n++) {
      const stream = Array.from({ length: 1 + next(12) }, () => PIECES[next(PIECES.length)]).join(
        '',
      );
      const byByte = verdict(
        stream,
        Array.from({ length: stream.length }, (_, i) => i),
      );
      const cuts = [
        ...new Set(Array.from({ length: next(4) }, () => next(stream.length + 1))),
      ].sort((a, b) => a - b);
      if (verdict(stream, cuts) !== byByte) disagreements++;
      if (verdict(stream, []) !== byByte) disagreements++;
      if (byByte !== null) blockedSeen++;
    }
    expect(disagreements).toBe(0);
    // the streams exercise both outcomes
    expect(blockedSeen).toBeGreaterThan(50);
    expect(blockedSeen).toBeLessThan(400);
  });

  it('a Host line continued after empty lines, in one read and across reads', () => {
    const s = 'Host: allowed.test\r\n\r\n\n blocked.test\r\n';
    expect(verdict(s, [])).toBe('blocked.test');
    expect(verdict(s, [20])).toBe('blocked.test');
    // a line in between ends the continuation
    const between = 'Host: allowed.test\r\nX: y\r\n blocked.test\r\n';
    expect(verdict(between, [])).toBeNull();
    expect(verdict(between, [26])).toBeNull(); // the continuation in the next read
    expect(verdict(between, [26, 27])).toBeNull();
  });
});

describe('what one read may hold', () => {
  it(`${MAX_NAMING_LINES} lines naming a host pass; one more is refused`, () => {
    const at = (n: number) => 'Host: allowed.test\r\n'.repeat(n);
    expect(verdict(at(MAX_NAMING_LINES), [])).toBeNull();
    expect(verdict(at(MAX_NAMING_LINES + 1), [])).toBe(
      `more than ${MAX_NAMING_LINES} lines naming a host in one read`,
    );
    // continuations count too
    expect(verdict(`Host: a\r\n${' b\r\n'.repeat(MAX_NAMING_LINES)}`, [])).toBe(
      `more than ${MAX_NAMING_LINES} lines naming a host in one read`,
    );
    // lines that name no host do not
    expect(verdict('GET /x HTTP/1.1\r\nX: y\r\n'.repeat(4 * MAX_NAMING_LINES), [])).toBeNull();
  });
});

describe('request targets a URL parser reads as another host', () => {
  it('name that host', () => {
    expect(namedHost('GET //blocked.test/x HTTP/1.1')).toBe('blocked.test');
    expect(namedHost('GET /\\blocked.test/x HTTP/1.1')).toBe('blocked.test');
    expect(namedHost('GET http:\\\\blocked.test/ HTTP/1.1')).toBe('blocked.test');
    expect(namedHost('GET /x//blocked.test HTTP/1.1')).toBeUndefined();
    expect(verdict('POST //blocked.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n', [])).toBe(
      'blocked.test',
    );
  });

  describe('HTTP/2 in the clear, whose requests name hosts on no line', () => {
    it('is refused by its preface or its upgrade; other upgrades pass', () => {
      const h2 = 'HTTP/2 in the clear (its requests name hosts on no line)';
      expect(verdict('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', [])).toBe(h2);
      expect(verdict('GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: h2c\r\n\r\n', [])).toBe(h2);
      expect(verdict('GET / HTTP/1.1\r\nupgrade:websocket, h2c\r\n\r\n', [7])).toBe(h2);
      expect(verdict('GET / HTTP/1.1\r\nupgrade: websocket\r\nX: h2c\r\n\r\n', [])).toBeNull();
    });
  });
});
