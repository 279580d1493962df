/**
 * The gate in front of Chromium's DevTools pipe (src/server/chromium/inbound.ts), on its own: when
 * it writes. A message waits while the socket still holds bytes and goes once it drained; at most
 * `CDP_PIPE_WINDOW_BYTES` are written before Chromium answers a barrier (one at a time, asked for
 * from half the window on, or when the socket stays full); a larger message goes alone; a barrier
 * left unanswered `CDP_PIPE_DEAF_MS` fails the pipe, unless the instance is paused meanwhile; a
 * closed pipe is written nothing and asked nothing. Byte counts are exact at each threshold: one
 * under, at, one over.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CDP_PIPE_DEAF_MS, CDP_PIPE_WINDOW_BYTES as WINDOW } from '../../src/api/cdp-limits.js';
import { MiB, closeGates, msg, reader, rig } from '../helpers/inbound-gate.js';

afterEach(() => {
  closeGates();
  vi.useRealTimers();
});

describe('a full socket', () => {
  it('holds messages until it drained, asking the pipe once however many wait', () => {
    const { gate, pipe, barrierCount } = rig();
    pipe.unwritten = 1;
    gate.send(msg('a', 1024));
    gate.send(msg('b', 1024));
    expect(pipe.written).toEqual([]);
    expect(pipe.drains).toHaveLength(1);
    pipe.drain();
    expect(pipe.written).toEqual(['a', 'b']);
    // nothing was written before the socket was full, and a and b are far from half the window
    expect(barrierCount()).toBe(0);
    // full again: the gate waits again, and goes again
    pipe.unwritten = 1;
    gate.send(msg('c', 1024));
    expect(pipe.written).toEqual(['a', 'b']);
    expect(pipe.drains).toHaveLength(1);
    pipe.drain();
    expect(pipe.written).toEqual(['a', 'b', 'c']);
  });

  it('writes one message per drain while each write fills it', () => {
    const { gate, pipe } = rig();
    pipe.fillOnSend = true;
    for (const name of ['a', 'b', 'c']) gate.send(msg(name, 1024));
    expect(pipe.written).toEqual(['a']);
    pipe.drain();
    expect(pipe.written).toEqual(['a', 'b']);
    pipe.drain();
    expect(pipe.written).toEqual(['a', 'b', 'c']);
  });

  it('left full after a write asks for a barrier; with nothing written it does not', () => {
    const { gate, pipe, barrierCount } = rig();
    gate.send(msg('a', MiB));
    expect(pipe.written).toEqual(['a']);
    expect(barrierCount()).toBe(0);
    pipe.unwritten = 1;
    gate.send(msg('b', 1024));
    expect(barrierCount()).toBe(1);
    pipe.drain();
    expect(pipe.written).toEqual(['a', 'b']);

    const fresh = rig();
    fresh.pipe.unwritten = 1;
    fresh.gate.send(msg('c', MiB));
    expect(fresh.pipe.written).toEqual([]);
    expect(fresh.barrierCount()).toBe(0);
  });
});

describe('the window', () => {
  it('writes up to exactly the window before a barrier is answered', () => {
    const { gate, pipe, barrierCount } = rig();
    pipe.unwritten = 1;
    gate.send(msg('a', MiB));
    gate.send(msg('b', WINDOW - MiB));
    pipe.drain();
    expect(pipe.written).toEqual(['a', 'b']);
    expect(barrierCount()).toBe(1);
  });

  it('holds the message one byte past it until the barrier is answered', () => {
    const { gate, pipe, barrierCount, answer } = rig();
    pipe.unwritten = 1;
    gate.send(msg('a', MiB));
    gate.send(msg('b', WINDOW - MiB + 1));
    pipe.drain();
    expect(pipe.written).toEqual(['a']);
    expect(barrierCount()).toBe(1);
    answer();
    expect(pipe.written).toEqual(['a', 'b']);
    // b alone is past half the window: Chromium is asked again
    expect(barrierCount()).toBe(2);
  });

  it('asks for a barrier once half the window is written, not one byte before', () => {
    const { gate, pipe, barrierCount } = rig();
    gate.send(msg('a', WINDOW / 2 - 1));
    expect(pipe.written).toEqual(['a']);
    expect(barrierCount()).toBe(0);
    gate.send(msg('b', 1));
    expect(pipe.written).toEqual(['a', 'b']);
    expect(barrierCount()).toBe(1);
  });

  it('has one barrier out at a time; answered, it frees what it covered', () => {
    const { gate, pipe, barrierCount, answer } = rig();
    gate.send(msg('a', WINDOW / 2));
    expect(barrierCount()).toBe(1);
    gate.send(msg('b', WINDOW / 2));
    gate.send(msg('c', 1));
    expect(pipe.written).toEqual(['a', 'b']);
    expect(barrierCount()).toBe(1);
    // the barrier covered a: b and c make half the window and a byte, so another is asked for
    answer();
    expect(pipe.written).toEqual(['a', 'b', 'c']);
    expect(barrierCount()).toBe(2);
    answer();
    gate.send(msg('d', WINDOW / 2 - 1));
    expect(pipe.written).toEqual(['a', 'b', 'c', 'd']);
    expect(barrierCount()).toBe(2);
  });

  it('lets a message larger than the window go alone', () => {
    const { gate, pipe, barrierCount, answer } = rig();
    gate.send(msg('big', WINDOW + 1));
    gate.send(msg('c', 1));
    expect(pipe.written).toEqual(['big']);
    expect(barrierCount()).toBe(1);
    answer();
    expect(pipe.written).toEqual(['big', 'c']);
  });
});

describe('a closed pipe', () => {
  it('is written nothing, asked for no barrier, and counts nothing against a client', () => {
    const { gate, pipe, barrierCount, answer } = rig();
    const log: string[] = [];
    gate.send(msg('a', WINDOW / 2));
    gate.send(msg('b', WINDOW / 2));
    expect(barrierCount()).toBe(1);
    pipe.isOpen = false;
    // answered after the pipe closed: half the window is still unconfirmed, but no barrier goes
    answer();
    expect(barrierCount()).toBe(1);
    gate.send(msg('c', WINDOW + 1), reader('A', log));
    expect(pipe.written).toEqual(['a', 'b']);
    expect(log).toEqual([]);
    expect(gate.paused).toBe(false);
  });
});

describe('a deaf browser', () => {
  const FAILURE = 'Chromium took in no DevTools message for 20 s';

  it('fails the pipe once a barrier is unanswered for the deaf time, not a millisecond before', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { gate, pipe } = rig();
    gate.send(msg('a', WINDOW / 2));
    vi.advanceTimersByTime(CDP_PIPE_DEAF_MS - 1);
    expect(pipe.isOpen).toBe(true);
    vi.advanceTimersByTime(1);
    expect(pipe.isOpen).toBe(false);
    expect(pipe.failure).toBe(FAILURE);
  });

  it('an answered barrier stops the clock', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { gate, pipe, answer } = rig();
    gate.send(msg('a', WINDOW / 2));
    vi.advanceTimersByTime(CDP_PIPE_DEAF_MS - 1);
    answer();
    vi.advanceTimersByTime(3 * CDP_PIPE_DEAF_MS);
    expect(pipe.isOpen).toBe(true);
  });

  it('a socket that stays full starts the clock too', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { gate, pipe } = rig();
    gate.send(msg('a', 1024));
    pipe.unwritten = 1;
    gate.send(msg('b', 1024));
    vi.advanceTimersByTime(CDP_PIPE_DEAF_MS);
    expect(pipe.failure).toBe(FAILURE);
  });

  it('a paused instance stops the clock; resumed, it starts again from zero', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { gate, pipe } = rig();
    gate.send(msg('a', WINDOW / 2));
    vi.advanceTimersByTime(CDP_PIPE_DEAF_MS - 1);
    gate.freeze(true);
    vi.advanceTimersByTime(3 * CDP_PIPE_DEAF_MS);
    expect(pipe.isOpen).toBe(true);
    gate.freeze(false);
    vi.advanceTimersByTime(CDP_PIPE_DEAF_MS - 1);
    expect(pipe.isOpen).toBe(true);
    vi.advanceTimersByTime(1);
    expect(pipe.failure).toBe(FAILURE);
  });

  it('a barrier asked for while the instance is paused is timed from its resumption', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { gate, pipe, barrierCount } = rig();
    gate.freeze(true);
    gate.send(msg('a', WINDOW / 2));
    expect(barrierCount()).toBe(1);
    vi.advanceTimersByTime(3 * CDP_PIPE_DEAF_MS);
    expect(pipe.isOpen).toBe(true);
    gate.freeze(false);
    vi.advanceTimersByTime(CDP_PIPE_DEAF_MS - 1);
    expect(pipe.isOpen).toBe(true);
    vi.advanceTimersByTime(1);
    expect(pipe.failure).toBe(FAILURE);
  });

  it('a closed gate stops the clock', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { gate, pipe } = rig();
    gate.send(msg('a', WINDOW / 2));
    gate.close();
    vi.advanceTimersByTime(3 * CDP_PIPE_DEAF_MS);
    expect(pipe.isOpen).toBe(true);
  });
});
