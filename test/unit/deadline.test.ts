/**
 * src/internal/deadline.ts. The races run on vitest's fake clock; `until` runs on the real one
 * (it sleeps with node:timers/promises), with intervals of a few milliseconds.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  abortable,
  raceDeadline,
  TIMED_OUT,
  until,
  withDeadline,
} from '../../src/internal/deadline.js';

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

/** A promise that settles when the fake clock reaches `ms`. */
const after = <T>(ms: number, value: T) =>
  new Promise<T>((resolve) => setTimeout(resolve, ms, value));
const failAfter = (ms: number, err: Error) =>
  new Promise<never>((_, reject) => setTimeout(reject, ms, err));

describe('raceDeadline', () => {
  it("gives the promise's value when it settles first, and clears its timer", async () => {
    const r = raceDeadline(after(50, 'ok'), 100);
    await vi.advanceTimersByTimeAsync(50);
    await expect(r).resolves.toBe('ok');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('gives TIMED_OUT when the deadline passes first', async () => {
    const late = after(500, 'late');
    const r = raceDeadline(late, 100);
    await vi.advanceTimersByTimeAsync(100);
    await expect(r).resolves.toBe(TIMED_OUT);
    await vi.advanceTimersByTimeAsync(400);
    await expect(late).resolves.toBe('late'); // not cancelled
  });

  it("passes the promise's rejection through", async () => {
    const r = raceDeadline(failAfter(10, new Error('broke')), 100);
    const check = expect(r).rejects.toThrow('broke');
    await vi.advanceTimersByTimeAsync(10);
    await check;
    expect(vi.getTimerCount()).toBe(0);
  });

  it('handles a rejection that comes after the deadline (no unhandled rejection)', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      const r = raceDeadline(failAfter(200, new Error('too late')), 100);
      await vi.advanceTimersByTimeAsync(100);
      await expect(r).resolves.toBe(TIMED_OUT);
      await vi.advanceTimersByTimeAsync(100);
      vi.useRealTimers();
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a deadline of 0 still lets an already resolved promise win', async () => {
    const r = raceDeadline(Promise.resolve(1), 0);
    await vi.advanceTimersByTimeAsync(0);
    await expect(r).resolves.toBe(1);
  });

  it('Infinity sets no timer', async () => {
    const r = raceDeadline(after(10_000_000, 'eventually'), Infinity);
    expect(vi.getTimerCount()).toBe(1); // only the promise's own
    await vi.advanceTimersByTimeAsync(10_000_000);
    await expect(r).resolves.toBe('eventually');
  });

  it('cuts a deadline beyond what a Node timer holds to the longest one, not to 1 ms', async () => {
    let outcome: unknown = 'pending';
    void raceDeadline(new Promise(() => {}), 2 ** 40).then((v) => (outcome = v));
    await vi.advanceTimersByTimeAsync(1000);
    expect(outcome).toBe('pending');
    await vi.advanceTimersByTimeAsync(2 ** 31);
    expect(outcome).toBe(TIMED_OUT);
  });

  it('can leave the process free to exit while it waits (unref)', () => {
    const spy = vi.spyOn(globalThis, 'setTimeout');
    void raceDeadline(new Promise(() => {}), 100, { unref: true });
    const timer = spy.mock.results.at(-1)!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    void raceDeadline(new Promise(() => {}), 100);
    expect((spy.mock.results.at(-1)!.value as NodeJS.Timeout).hasRef()).toBe(true);
    spy.mockRestore();
  });
});

describe('withDeadline', () => {
  it('rejects with the given error past the deadline', async () => {
    const err = new Error('X GetImage did not answer within 100 ms');
    const r = withDeadline(new Promise(() => {}), 100, err);
    const check = expect(r).rejects.toBe(err);
    await vi.advanceTimersByTimeAsync(99);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    await check;
    expect(vi.getTimerCount()).toBe(0);
  });

  it('makes the error only when the deadline passes, if given a function', async () => {
    const make = vi.fn(() => new Error('made'));
    await expect(withDeadline(Promise.resolve('v'), 100, make)).resolves.toBe('v');
    expect(make).not.toHaveBeenCalled();
    const r = withDeadline(new Promise(() => {}), 5, make);
    const check = expect(r).rejects.toThrow('made');
    await vi.advanceTimersByTimeAsync(5);
    await check;
    expect(make).toHaveBeenCalledOnce();
  });
});

describe('abort signals', () => {
  it("rejects with the signal's reason when it aborts first, and cleans up", async () => {
    const ctl = new AbortController();
    const remove = vi.spyOn(ctl.signal, 'removeEventListener');
    const r = withDeadline(new Promise(() => {}), 1000, new Error('timeout'), {
      signal: ctl.signal,
    });
    const reason = new Error('caller gave up');
    ctl.abort(reason);
    await expect(r).rejects.toBe(reason);
    expect(remove).toHaveBeenCalledWith('abort', expect.any(Function));
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects at once for a signal that has already aborted', async () => {
    const r = raceDeadline(Promise.resolve('value'), 1000, { signal: AbortSignal.abort('gone') });
    await expect(r).rejects.toBe('gone');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('removes its listener when the promise wins', async () => {
    const ctl = new AbortController();
    const remove = vi.spyOn(ctl.signal, 'removeEventListener');
    await expect(raceDeadline(Promise.resolve(3), 1000, { signal: ctl.signal })).resolves.toBe(3);
    expect(remove).toHaveBeenCalledOnce();
    ctl.abort(); // too late to matter
  });

  it('abortable waits without a deadline until the signal aborts', async () => {
    const ctl = new AbortController();
    const r = abortable(new Promise(() => {}), ctl.signal);
    await vi.advanceTimersByTimeAsync(1e9);
    expect(vi.getTimerCount()).toBe(0);
    ctl.abort(new Error('stop'));
    await expect(r).rejects.toThrow('stop');
    await expect(abortable(Promise.resolve('v'), new AbortController().signal)).resolves.toBe('v');
  });
});

describe('until (real timers)', () => {
  beforeEach(() => vi.useRealTimers());

  it('resolves true once the predicate holds, polling at the interval', async () => {
    let calls = 0;
    const t0 = performance.now();
    await expect(until(() => ++calls === 4, { timeoutMs: 5000, intervalMs: 10 })).resolves.toBe(
      true,
    );
    expect(calls).toBe(4);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25); // three pauses of 10 ms
  });

  it('makes one call only when the predicate holds at once', async () => {
    const predicate = vi.fn(() => true);
    await expect(until(predicate, { timeoutMs: 1000, intervalMs: 1000 })).resolves.toBe(true);
    expect(predicate).toHaveBeenCalledOnce();
  });

  it('awaits an async predicate', async () => {
    let calls = 0;
    const predicate = async () => {
      await new Promise((r) => setImmediate(r));
      return ++calls >= 3;
    };
    await expect(until(predicate, { timeoutMs: 5000, intervalMs: 1 })).resolves.toBe(true);
    expect(calls).toBe(3);
  });

  it('resolves false after the timeout, having asked once more at the deadline', async () => {
    const predicate = vi.fn(() => false);
    const t0 = performance.now();
    await expect(until(predicate, { timeoutMs: 60, intervalMs: 25 })).resolves.toBe(false);
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(55); // timers never fire early (the clocks differ by ~1 ms)
    // at 0, 25, 50 and (the last pause cut short) 60 ms; more only if the machine is slow
    expect(predicate.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(predicate.mock.calls.length).toBeLessThanOrEqual(6); // a timer may wake a hair early
  });

  it('does not wait a whole interval past the deadline', async () => {
    const t0 = performance.now();
    await expect(until(() => false, { timeoutMs: 30, intervalMs: 10_000 })).resolves.toBe(false);
    expect(performance.now() - t0).toBeLessThan(9000); // well short of the 10 s interval
  });

  it('a timeout of 0 is exactly one call', async () => {
    const predicate = vi.fn(() => false);
    await expect(until(predicate, { timeoutMs: 0, intervalMs: 10 })).resolves.toBe(false);
    expect(predicate).toHaveBeenCalledOnce();
  });

  it("rejects with the predicate's error", async () => {
    let calls = 0;
    const predicate = () => {
      if (++calls === 2) throw new Error('cannot look');
      return false;
    };
    await expect(until(predicate, { timeoutMs: 5000, intervalMs: 1 })).rejects.toThrow(
      'cannot look',
    );
    expect(calls).toBe(2);
  });

  it("rejects with the signal's reason when it aborts during a pause, and stops calling", async () => {
    const ctl = new AbortController();
    const reason = new Error('instance stopped');
    const predicate = vi.fn(() => false);
    const r = until(predicate, { timeoutMs: 10_000, intervalMs: 5, signal: ctl.signal });
    await new Promise((res) => setTimeout(res, 30));
    ctl.abort(reason);
    await expect(r).rejects.toBe(reason);
    const calls = predicate.mock.calls.length;
    expect(calls).toBeGreaterThanOrEqual(2);
    await new Promise((res) => setTimeout(res, 30));
    expect(predicate.mock.calls.length).toBe(calls);
  });

  it('rejects during an async call that hangs, and before any call for an aborted signal', async () => {
    const ctl = new AbortController();
    const r = until(() => new Promise<boolean>(() => {}), {
      timeoutMs: 10_000,
      intervalMs: 5,
      signal: ctl.signal,
    });
    setTimeout(() => ctl.abort('gone'), 10);
    await expect(r).rejects.toBe('gone');
    const predicate = vi.fn(() => true);
    await expect(
      until(predicate, { timeoutMs: 100, intervalMs: 5, signal: AbortSignal.abort('early') }),
    ).rejects.toBe('early');
    expect(predicate).not.toHaveBeenCalled();
  });
});
