/**
 * Deadlines on promises: wait for a promise at most so long, or until a signal aborts. One
 * mechanism (`raceDeadline`) in three shapes: resolve with `TIMED_OUT`, reject with a given
 * error (`withDeadline`), or only stop at an abort (`abortable`). The timer and the abort
 * listener are removed as soon as the race is decided; the promise itself is not cancelled
 * (its owner stops the work, e.g. kills the process), and a rejection it delivers after the
 * race is decided is handled, never reported as unhandled. Conditions nothing announces are
 * polled with `until`; a plain pause is `setTimeout` of `node:timers/promises`.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** Longest delay a Node timer supports (about 24.8 days); longer deadlines are cut to it. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What `raceDeadline` resolves with when the deadline passed first. */
export const TIMED_OUT: unique symbol = Symbol('timed out');

export interface DeadlineOptions {
  /** Stop waiting when this aborts: the race rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /**
   * Do not keep the process alive for the deadline's timer (`unref`), e.g. for a grace period
   * before a SIGKILL that must not delay the server's exit. Default false.
   */
  unref?: boolean | undefined;
}

/**
 * `promise`'s outcome if it settles within `ms` milliseconds, else `TIMED_OUT`. `ms` may be
 * `Infinity` (no deadline, only the signal). Rejects with the signal's reason if it aborts
 * first (at once if it already has).
 */
export function raceDeadline<T>(
  promise: PromiseLike<T>,
  ms: number,
  opts: DeadlineOptions = {},
): Promise<T | typeof TIMED_OUT> {
  const { signal, unref = false } = opts;
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => settle(() => reject(signal!.reason));
    let decided = false;
    const settle = (finish: () => void) => {
      if (decided) return;
      decided = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      finish();
    };
    promise.then(
      (value) => settle(() => resolve(value)),
      (err: unknown) => settle(() => reject(err)),
    );
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (ms !== Infinity) {
      timer = setTimeout(
        () => settle(() => resolve(TIMED_OUT)),
        Math.min(Math.max(0, ms), MAX_TIMER_MS),
      );
      if (unref) timer.unref();
    }
  });
}

/**
 * `promise`'s outcome if it settles within `ms` milliseconds; otherwise rejects with `error`
 * (an Error, or a function making one when the deadline passes).
 */
export async function withDeadline<T>(
  promise: PromiseLike<T>,
  ms: number,
  error: Error | (() => Error),
  opts: DeadlineOptions = {},
): Promise<T> {
  const outcome = await raceDeadline(promise, ms, opts);
  if (outcome === TIMED_OUT) throw typeof error === 'function' ? error() : error;
  return outcome;
}

/** `promise`'s outcome, unless `signal` aborts first: then its reason. No deadline. */
export async function abortable<T>(promise: PromiseLike<T>, signal: AbortSignal): Promise<T> {
  return (await raceDeadline(promise, Infinity, { signal })) as T;
}

export interface UntilOptions {
  /** Give up after this many milliseconds (`Infinity`: never, only the signal stops it). */
  timeoutMs: number;
  /** Pause between two calls of the predicate. */
  intervalMs: number;
  /** Stop polling when this aborts: `until` rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
}

/**
 * Calls `predicate` (sync or async) until it returns true, pausing `intervalMs` between calls.
 * Resolves true as soon as it does; resolves false when it still has not after `timeoutMs` (the
 * caller turns that into its own error). The first call is made at once and the deadline is looked
 * at after each call that returned false, the last pause being cut to the deadline: the predicate
 * always has its last word at the deadline, and a timeout of 0 means exactly one call. A call in
 * progress is not cut short by the deadline (a predicate that can hang bounds itself). Rejects with
 * the predicate's error if it throws, and with the signal's reason when the signal aborts (before
 * the first call, during a pause, or during an async call, which is then no longer awaited).
 */
export async function until(
  predicate: () => boolean | PromiseLike<boolean>,
  opts: UntilOptions,
): Promise<boolean> {
  const { timeoutMs, intervalMs, signal } = opts;
  const end = performance.now() + Math.max(0, timeoutMs);
  for (;;) {
    signal?.throwIfAborted();
    const answer = predicate();
    if (
      typeof answer === 'boolean' ? answer : await (signal ? abortable(answer, signal) : answer)
    ) {
      return true;
    }
    const left = end - performance.now();
    if (left <= 0) return false;
    try {
      await sleep(Math.min(intervalMs, left, MAX_TIMER_MS), undefined, { signal });
    } catch (err) {
      // the timer's AbortError carries the reason only as its cause: give the reason itself
      if (signal?.aborted) throw signal.reason;
      throw err;
    }
  }
}
