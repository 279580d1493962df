/**
 * The gate in front of Chromium's DevTools pipe (src/server/chromium/inbound.ts), on its own: what
 * may wait in it. A client with more than the pipe's window waiting is not read until at most half
 * of it waits; past `CDP_MAX_INBOUND_BYTES_PER_CLIENT` its messages are let go and it is closed
 * (`overflow`); past the browser's total (`_PER_BROWSER`) or the server's (`_TOTAL`, every gate
 * together) every client of the gate is not read until both are at most half, except a client
 * still over its own window. Byte counts are exact at each threshold: one under, at, one over.
 * Every gate is closed after each test: the server's total is shared by all of them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  CDP_MAX_INBOUND_BYTES_PER_BROWSER as PER_BROWSER,
  CDP_MAX_INBOUND_BYTES_PER_CLIENT as PER_CLIENT,
  CDP_MAX_INBOUND_BYTES_TOTAL as TOTAL,
  CDP_PIPE_WINDOW_BYTES as WINDOW,
} from '../../src/api/cdp-limits.js';
import { INBOUND_CLOSE, PIPE_FAILED, type Readers } from '../../src/server/chromium/inbound.js';
import { closeGates, msg, reader, rig } from '../helpers/inbound-gate.js';

afterEach(closeGates);

/** A gate whose socket is full (everything sent waits), with readers A and B as its clients. */
function waiting() {
  const r = rig();
  r.pipe.unwritten = 1;
  const log: string[] = [];
  const a = reader('A', log);
  const b = reader('B', log);
  r.clients.push(a, b);
  return { ...r, log, a, b };
}

describe('a new gate', () => {
  it('is not paused, and pauses or resumes nobody for a small message', () => {
    const { gate, log, a } = waiting();
    expect(gate.paused).toBe(false);
    gate.send(msg('a', 1024), a);
    expect(gate.paused).toBe(false);
    expect(log).toEqual([]);
  });
});

describe("a client's own window", () => {
  it('is not read with one byte more than the window waiting; exactly the window is read', () => {
    const { gate, log, a } = waiting();
    gate.send(msg('a1', WINDOW - 1), a);
    gate.send(msg('a2', 1), a);
    expect(log).toEqual([]);
    gate.send(msg('a3', 1), a);
    expect(log).toEqual(['A pause']);
    gate.send(msg('a4', 1), a);
    expect(log).toEqual(['A pause']);
  });

  it('is read again once exactly half the window waits', () => {
    const { gate, pipe, log, a } = waiting();
    gate.send(msg('a1', WINDOW / 2 + 1), a);
    gate.send(msg('a2', WINDOW / 2), a);
    expect(log).toEqual(['A pause']);
    pipe.drain();
    expect(pipe.written).toEqual(['a1']);
    expect(log).toEqual(['A pause', 'A resume']);
  });

  it('is not read with half the window and a byte waiting', () => {
    const { gate, pipe, log, a, answer } = waiting();
    gate.send(msg('a1', WINDOW / 2), a);
    gate.send(msg('a2', WINDOW / 2 + 1), a);
    pipe.drain();
    expect(pipe.written).toEqual(['a1']);
    expect(log).toEqual(['A pause']);
    answer();
    expect(pipe.written).toEqual(['a1', 'a2']);
    expect(log).toEqual(['A pause', 'A resume']);
  });

  it('a client without a socket, or one that cannot be paused, is counted the same', () => {
    const { gate, pipe, answer } = waiting();
    const bare: Readers = {};
    const mute: Readers = { peer: {} };
    for (const owner of [bare, mute]) {
      gate.send(msg('x', WINDOW + 1), owner);
      pipe.drain();
      answer();
    }
    expect(pipe.written).toEqual(['x', 'x']);
  });
});

describe("a client's bound", () => {
  it('takes exactly its bytes; one more lets its messages go and closes it, not the others', () => {
    const { gate, pipe, overflows, a, b } = waiting();
    gate.send(msg('a1', PER_CLIENT - 1), a);
    gate.send(msg('b1', 1024), b);
    gate.send(msg('a2', 1), a);
    expect(overflows).toEqual([]);
    gate.send(msg('a3', 1), a);
    expect(overflows).toEqual([a]);
    pipe.drain();
    expect(pipe.written).toEqual(['b1']);
    // what it had waiting no longer counts against it
    gate.send(msg('a4', PER_CLIENT), a);
    expect(overflows).toEqual([a]);
  });

  it('closes it with a reason that names the bound in MiB, and fits a close frame', () => {
    expect(INBOUND_CLOSE).toEqual({
      code: 1008,
      reason: 'CDP client sends faster than the browser reads: over 128 MiB waiting',
    });
    expect(PIPE_FAILED).toEqual({
      code: 1011,
      reason: 'the browser stopped taking in DevTools messages or broke a bound; it was stopped',
    });
    // a WebSocket close frame carries at most 123 bytes of reason
    for (const { reason } of [INBOUND_CLOSE, PIPE_FAILED]) {
      expect(Buffer.byteLength(reason)).toBeLessThanOrEqual(123);
    }
  });

  it('forgetting a client lets go of its messages only, wherever they wait', () => {
    const { gate, pipe, a, b } = waiting();
    gate.send(msg('a1', 1024), a);
    gate.send(msg('b1', 1024), b);
    gate.send(msg('a2', 1024), a);
    gate.send(msg('b2', 1024), b);
    gate.forget(a);
    gate.forget(a);
    gate.forget(reader('C', []));
    pipe.drain();
    expect(pipe.written).toEqual(['b1', 'b2']);
  });
});

describe("the browser's total", () => {
  it('pauses every client one byte past it, not at it, and stays paused', () => {
    const { gate, log, clients } = waiting();
    // clients without a socket, or whose socket cannot be paused, are passed over
    clients.push({}, { peer: {} });
    gate.send(msg('filler', PER_BROWSER - 1));
    gate.send(msg('x', 1));
    expect(gate.paused).toBe(false);
    expect(log).toEqual([]);
    gate.send(msg('y', 1));
    expect(gate.paused).toBe(true);
    expect(log).toEqual(['A pause', 'B pause']);
    gate.send(msg('z', 1));
    expect(gate.paused).toBe(true);
    expect(log).toEqual(['A pause', 'B pause']);
  });

  it('reads them again once exactly half of it waits, not one byte more', () => {
    const { gate, log, clients } = waiting();
    clients.push({}, { peer: {} });
    const e = reader('E', log);
    const f = reader('F', log);
    const g = reader('G', log);
    gate.send(msg('filler', PER_BROWSER / 2));
    gate.send(msg('e', PER_BROWSER / 2 - 1), e);
    gate.send(msg('f', 1), f);
    expect(gate.paused).toBe(false);
    gate.send(msg('g', 1), g);
    expect(gate.paused).toBe(true);
    expect(log).toEqual(['E pause', 'A pause', 'B pause']);
    gate.forget(e);
    gate.forget(g);
    // half and a byte
    expect(gate.paused).toBe(true);
    expect(log).toEqual(['E pause', 'A pause', 'B pause']);
    gate.forget(f);
    expect(gate.paused).toBe(false);
    expect(log).toEqual(['E pause', 'A pause', 'B pause', 'A resume', 'B resume']);
  });

  it('a client whose own messages were written is read again only with the others', () => {
    const { gate, pipe, log, a } = waiting();
    pipe.fillOnSend = true;
    const c = reader('C', log);
    gate.send(msg('a1', WINDOW + 1), a);
    gate.send(msg('filler', PER_BROWSER / 2 - WINDOW));
    gate.send(msg('c1', PER_BROWSER / 2), c);
    expect(log).toEqual(['A pause', 'C pause', 'A pause', 'B pause']);
    pipe.drain();
    expect(pipe.written).toEqual(['a1']);
    expect(log).toEqual(['A pause', 'C pause', 'A pause', 'B pause']);
    gate.forget(c);
    expect(gate.paused).toBe(false);
    expect(log).toEqual(['A pause', 'C pause', 'A pause', 'B pause', 'A resume', 'B resume']);
  });

  it('a client still over its own window stays unread when the others are read again', () => {
    const { gate, log, a } = waiting();
    const c = reader('C', log);
    const d = reader('D', log);
    gate.send(msg('a1', WINDOW + 1), a);
    gate.send(msg('filler', PER_BROWSER / 2 - WINDOW - 1));
    gate.send(msg('c1', PER_BROWSER / 2), c);
    gate.send(msg('d1', 1), d);
    expect(gate.paused).toBe(true);
    expect(log).toEqual(['A pause', 'C pause', 'A pause', 'B pause']);
    gate.forget(c);
    expect(gate.paused).toBe(true);
    gate.forget(d);
    expect(gate.paused).toBe(false);
    expect(log).toEqual(['A pause', 'C pause', 'A pause', 'B pause', 'B resume']);
  });
});

describe("the server's total", () => {
  it('pauses every gate one byte past it, not at it; reads them again at half', () => {
    const logs: string[][] = [[], [], []];
    const [one, two, three] = logs.map((log, i) => {
      const r = rig();
      r.pipe.unwritten = 1;
      r.clients.push(reader(`G${i + 1}`, log));
      return r;
    }) as [ReturnType<typeof rig>, ReturnType<typeof rig>, ReturnType<typeof rig>];
    const x = reader('X', []);
    const y = reader('Y', []);
    one.gate.send(msg('one', PER_BROWSER));
    two.gate.send(msg('two', PER_BROWSER / 2 + 1));
    three.gate.send(msg('three', TOTAL - PER_BROWSER - PER_BROWSER / 2 - 2));
    three.gate.send(msg('x', 1), x);
    // exactly the total: none paused (and none is past its browser's)
    expect([one, two, three].map((r) => r.gate.paused)).toEqual([false, false, false]);
    three.gate.send(msg('y', 1), y);
    expect([one, two, three].map((r) => r.gate.paused)).toEqual([true, true, true]);
    expect(logs).toEqual([['G1 pause'], ['G2 pause'], ['G3 pause']]);
    // the first gate's pipe is gone: what waited in it no longer counts, its clients are read
    one.gate.close();
    expect(logs[0]).toEqual(['G1 pause', 'G1 resume']);
    // half the total and a byte: the others stay paused
    expect([two, three].map((r) => r.gate.paused)).toEqual([true, true]);
    three.gate.forget(y);
    // exactly half: the third (under half its browser's) is read again; the second is not
    expect([two, three].map((r) => r.gate.paused)).toEqual([true, false]);
    expect(logs).toEqual([['G1 pause', 'G1 resume'], ['G2 pause'], ['G3 pause', 'G3 resume']]);
  });
});

describe('closing a gate', () => {
  it('resumes nobody it had not paused', () => {
    const { gate, log, a } = waiting();
    gate.send(msg('a1', 1024), a);
    gate.close();
    expect(gate.paused).toBe(false);
    expect(log).toEqual([]);
  });

  it('reads every client again, a client over its own window too', () => {
    const { gate, log, a } = waiting();
    gate.send(msg('a1', WINDOW + 1), a);
    gate.send(msg('filler', PER_BROWSER));
    expect(log).toEqual(['A pause', 'A pause', 'B pause']);
    gate.close();
    expect(gate.paused).toBe(false);
    expect(log).toEqual(['A pause', 'A pause', 'B pause', 'A resume', 'B resume']);
  });
});
