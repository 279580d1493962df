/**
 * Work done again and again while something runs (a lease renewed, other nodes looked at): one
 * loop instead of a timer that re-arms itself in each class. The pause is counted from the end of
 * a run, so runs never overlap however long one takes, and it never keeps the process alive: a
 * server that is otherwise done may exit without stopping its watches first.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Calls `task` every `intervalMs` milliseconds, the first time after one pause, until `signal`
 * aborts (during a pause, or before the next run: a run in progress is not cut short) or a run
 * returns `false`. Resolves then; rejects only with the error of a run that threw (a task that
 * must go on after a failure catches its own).
 */
export async function repeat(
  task: () => unknown,
  intervalMs: number,
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted) {
    try {
      await sleep(intervalMs, undefined, { signal, ref: false });
    } catch {
      return; // aborted during the pause
    }
    if (signal.aborted) return;
    if ((await task()) === false) return;
  }
}
