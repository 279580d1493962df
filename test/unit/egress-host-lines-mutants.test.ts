/**
 * Exact decisions of the tunnel's Host rule (egress/host-lines.ts) at the edges its code draws:
 * which first bytes make a line worth reading when it comes cut (methods `A` to `Z`, lowercase
 * `host`/`upgrade`, and a space or tab only right after a `Host` line); which line end a chunk
 * that continues a line stops at (CR or LF, whichever comes first, wherever it sits); when a
 * `Host` line's continuation (obs-fold) ends; what counts towards the lines naming a host in one
 * read; the exact spellings of the naming patterns (spaces before a colon or a target, anchors at
 * the line's start, the HTTP/2 preface's own line); and what `namedHost` makes of a value that
 * does not parse as an authority (a tab before it, a bracketed literal, stray or invalid `%`).
 */
import { describe, expect, it } from 'vitest';
import { blockedDomainMatcher } from '../../src/server/sandbox/egress/policy.js';
import {
  HostLines,
  MAX_LINE,
  MAX_NAMING_LINES,
  namedHost,
} from '../../src/server/sandbox/egress/host-lines.js';

const blocked = blockedDomainMatcher(['blocked.test']);
const H2 = 'HTTP/2 in the clear (its requests name hosts on no line)';

/** Feed `chunks` in order, then end: what passed, and the blocked host if one ended it. */
function run(chunks: string[]): { passed: string; blocked?: string } {
  const lines = new HostLines(blocked);
  let passed = '';
  for (const step of [
    ...chunks.map((c) => () => lines.feed(Buffer.from(c, 'latin1'))),
    () => lines.end(),
  ]) {
    const v = step();
    if ('blocked' in v) return { passed, blocked: v.blocked };
    passed += v.pass.toString('latin1');
  }
  return { passed };
}

/** `chunks` pass whole. */
function passes(chunks: string[]): void {
  expect(run(chunks)).toEqual({ passed: chunks.join('') });
}

describe('namedHost on values that are no authority', () => {
  it('reads a request line with several spaces or tabs before its target', () => {
    expect(namedHost('GET  //blocked.test/ HTTP/1.1')).toBe('blocked.test');
    expect(namedHost('GET \t http://blocked.test/ HTTP/1.1')).toBe('blocked.test');
  });

  it('finds no request line inside a header whose value holds a word and a URL', () => {
    expect(namedHost('X-Note: SEE http://blocked.test/')).toBeUndefined();
    expect(namedHost('Referer: GET //blocked.test/')).toBeUndefined();
  });

  it('leaves out the tabs before a value whose port does not parse', () => {
    expect(namedHost('Host:\tblocked.test:x')).toBe('blocked.test');
    expect(namedHost('Host: \t blocked.test;x')).toBe('blocked.test');
  });

  it('keeps a bracketed literal whole when its port or its content does not parse', () => {
    expect(namedHost('Host: [::1]:x')).toBe('[::1]');
    expect(namedHost('Host: [a b]')).toBe('[a b]');
  });

  it('decodes the escapes of a value that also holds a `%` that is none', () => {
    // `%4` is followed by one hex digit only, `%zz` by none: each stays a `%`
    expect(namedHost('Host: blocked%2etest%4')).toBe('blocked.test');
    expect(namedHost('Host: blocked%2etest%zz')).toBe('blocked.test');
  });

  it('leaves a value whose escapes are not UTF-8 as it is', () => {
    expect(namedHost('Host: ok.test%ff')).toBe('ok.test');
    expect(namedHost('Host: blocked.test%c3')).toBe('blocked.test');
  });
});

describe('a line that arrives cut is read by its first byte', () => {
  it('a method from A to Z', () => {
    for (const method of ['ACL', 'ZAP']) {
      const line = `${method} http://blocked.test/ HTTP/1.1`;
      expect(run([line, '\r\n']), method).toEqual({ passed: line, blocked: 'blocked.test' });
    }
  });

  it('a lowercase host or upgrade header', () => {
    expect(run(['host: blocked.test', '\r\n'])).toEqual({
      passed: 'host: blocked.test',
      blocked: 'blocked.test',
    });
    expect(run(['upgrade: h2c', '\r\n'])).toEqual({ passed: 'upgrade: h2c', blocked: H2 });
  });

  it('a space or a tab only right after a Host line, as its continuation', () => {
    for (const fold of [' blocked.test', '\tblocked.test']) {
      expect(run(['Host: ok.test\r\n', fold, '\r\n'])).toEqual({
        passed: `Host: ok.test\r\n${fold}`,
        blocked: 'blocked.test',
      });
    }
  });

  it('and no other: a lowercase preface is not read, after a Host line or not', () => {
    passes(['pri * HTTP/2.0', '\r\n']);
    passes(['Host: ok.test\r\n', 'pri * HTTP/2.0', '\r\n']);
    passes(['pri * HTTP/2.0\r\n']);
  });

  it('a naming line of exactly the bound in one piece is read whole', () => {
    const line = `GET http://ok.test/${'a'.repeat(MAX_LINE - 19)}`;
    expect(line.length).toBe(MAX_LINE);
    passes([line, '\r\n']);
    expect(run([`${line}a`, '\r\n']).blocked).toBe(
      `a line of more than ${MAX_LINE} bytes naming a host`,
    );
  });
});

describe('a chunk that continues a line ends it at its first line end', () => {
  it('a CR alone, or a CR before an LF', () => {
    for (const rest of ['\rHost: blocked.test\r', '\rHost: blocked.test\r\n']) {
      expect(run(['GET / HTTP/1.1', rest]), JSON.stringify(rest)).toEqual({
        passed: 'GET / HTTP/1.1',
        blocked: 'blocked.test',
      });
    }
  });

  it('at its second byte, and reads the lines after it', () => {
    passes(['GET / HTTP/1.1', 'x\nHost: ok.test\r\n']);
    passes(['GET / HTTP/1.1', 'x\rHost: ok.test\n']);
    expect(run(['GET / HTTP/1.1', 'x\nHost: blocked.test\r\n']).blocked).toBe('blocked.test');
  });

  it('so the preface cut before its end is still the preface', () => {
    expect(run(['PRI * HTTP/2', '.0\r\n\r\nSM\r\n\r\n'])).toEqual({
      passed: 'PRI * HTTP/2',
      blocked: H2,
    });
  });

  it('and a Host line ended there is continued by the next line', () => {
    expect(run(['Host: ok.tes', 't\n blocked.test\n']).blocked).toBe('blocked.test');
    expect(run(['Host: ok.tes', 't\r\n blocked.test\r\n']).blocked).toBe('blocked.test');
  });
});

describe('a Host line is continued (obs-fold) only by the line right after it', () => {
  it('across reads, after a Host line ended by a bare LF', () => {
    expect(run(['GET / HTTP/1.1\r\nHost: ok.test\n', ' blocked.test\r\n']).blocked).toBe(
      'blocked.test',
    );
  });

  it('not after another header in between, one read or two', () => {
    passes(['Host: ok.test\nX\n', ' blocked.test\n']);
    for (const header of ['X-A: 1', 'x-a: 1']) {
      passes([`Host: ok.test\r\n${header}`, '\r\n blocked.test\r\n']);
      passes([`Host: ok.test\r\n${header}\r\n blocked.test\r\n`]);
    }
  });

  it('not after a line that is not read (a lowercase method)', () => {
    passes(['Host: ok.test\r\nget //x/ HTTP/1.1\r\n blocked.test\r\n']);
  });

  it('a long continuation is judged the same in one read and cut', () => {
    const text = `Host: ok.test\r\n ${'a'.repeat(MAX_LINE)} blocked.test\r\n`;
    const whole = run([text]);
    const cut = run([text.slice(0, 20), text.slice(20)]);
    expect(whole.blocked).toBe(cut.blocked);
  });
});

describe('the lines naming a host in one read', () => {
  it('are counted with bare LF line ends too', () => {
    expect(run(['Host: ok.test\n'.repeat(MAX_NAMING_LINES + 1)]).blocked).toBe(
      `more than ${MAX_NAMING_LINES} lines naming a host in one read`,
    );
  });

  it('leave out the other headers, even right after a Host line', () => {
    passes(['Host: ok.test\r\nAccept: */*\r\n'.repeat(200)]);
  });

  it('leave out lines whose first byte no naming line starts with', () => {
    passes(['get //x/ HTTP/1.1\n'.repeat(MAX_NAMING_LINES + 44)]);
  });
});

describe('the naming patterns, exactly', () => {
  it('a Host or Upgrade header with spaces before its colon', () => {
    expect(run(['GET / HTTP/1.1\r\nHost : blocked.test\r\n\r\n']).blocked).toBe('blocked.test');
    expect(run(['GET / HTTP/1.1\r\nUpgrade\t: h2c\r\n\r\n']).blocked).toBe(H2);
  });

  it('a request line with two spaces before its target', () => {
    expect(run(['GET  http://blocked.test/ HTTP/1.1\r\n\r\n']).blocked).toBe('blocked.test');
  });

  it('only at the start of a line: not inside another header, one read or cut', () => {
    passes(['X-Note: see host: blocked.test\r\n']);
    passes(['X-Upgrade: h2c', '\r\n']);
    passes([`X-Note: host: ${'a'.repeat(MAX_LINE)}`, '\r\n']);
  });

  it('the preface is its own line, `PRI * HTTP/2.0`, and nothing after', () => {
    passes(['PRI * HTTP/2.0x\r\n']);
    expect(run(['PRI * HTTP/2.0\r\n']).blocked).toBe(H2);
  });
});
