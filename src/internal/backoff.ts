/**
 * The retry of background work that failed (a warm-pool fill, a sandbox made ahead): it waits
 * 1 s after the first failure, twice as long after each next one, at most a minute, and starts
 * over once the work succeeds. So a machine that cannot do the work does not spin at it.
 */
export class RetryBackoff {
  readonly #minMs: number;
  readonly #maxMs: number;
  #waitMs = 0;
  #timer: NodeJS.Timeout | undefined;
  #retry: (() => void) | undefined;

  constructor(minMs = 1_000, maxMs = 60_000) {
    this.#minMs = minMs;
    this.#maxMs = maxMs;
  }

  /** Whether a retry is waiting. */
  get pending(): boolean {
    return this.#timer !== undefined;
  }

  /**
   * After a failure: run `retry` once the next wait is over (the timer never keeps the process
   * alive). Returns that wait in ms.
   */
  schedule(retry: () => void): number {
    this.#waitMs = Math.min(this.#maxMs, Math.max(this.#minMs, this.#waitMs * 2));
    clearTimeout(this.#timer);
    this.#retry = retry;
    this.#timer = setTimeout(() => this.now(), this.#waitMs);
    this.#timer.unref();
    return this.#waitMs;
  }

  /**
   * After a failure: resolves once the next wait is over (or `now()` ends it), with that wait.
   * For one waiter at a time, as `schedule` is: a later `schedule` or `wait` replaces it, and the
   * promise it replaced never settles.
   */
  wait(): Promise<number> {
    return new Promise((resolve) => {
      const ms = this.schedule(() => resolve(ms));
    });
  }

  /** Run the waiting retry now, without waiting out its time (its owner is closing, say). */
  now(): void {
    const retry = this.#retry;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#retry = undefined;
    retry?.();
  }

  /** The work succeeded: the next failure waits the shortest time again. */
  succeeded(): void {
    this.#waitMs = 0;
  }

  /** Drop a waiting retry. */
  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#retry = undefined;
  }
}
