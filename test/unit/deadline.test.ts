/** src/internal/deadline.ts on vitest's fake clock: no test waits for real time. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { abortable, raceDeadline, TIMED_OUT, withDeadline } from '../../src/internal/deadline.js';

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
