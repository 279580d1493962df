/**
 * A budget of bytes shared by callers that each hold some for a while (e.g. the profiles the
 * server reads back at once, each up to hundreds of MB): a caller takes what it needs before it
 * allocates, waits its turn when that does not fit beside what others hold, and gives it back.
 * Turns are first come, first served: a large request at the head is not passed over forever by
 * small ones behind it. A request larger than the whole budget is served alone (it waits until
 * nothing else is held), so the budget bounds how much is held at once and never refuses what a
 * caller's own bound allows. A wait is bounded; past it the request fails and holds nothing.
 */

interface Waiter {
  bytes: number;
  grant: () => void;
}

export class ByteBudget {
  readonly limit: number;
  #used = 0;
  readonly #queue: Waiter[] = [];

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Bytes held now. */
  get used(): number {
    return this.#used;
  }

  /** Callers waiting for their turn now. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Holds `bytes` for the caller now if they fit and nobody waits before, returning the function
   * giving them back (idempotent); else holds nothing and returns undefined.
   */
  tryTake(bytes: number): (() => void) | undefined {
    const charge = this.#charge(bytes);
    if (this.#queue.length > 0 || !this.#fits(charge)) return undefined;
    this.#used += charge;
    return this.#giveBack(charge);
  }

  /**
   * Resolves once `bytes` are held for the caller (at once when they fit and nobody waits
   * before), with the function giving them back (idempotent). Rejects with `timeout()`'s error
   * after `timeoutMs` of waiting, or with the signal's reason once `signal` aborts, holding
   * nothing; either way the caller leaves the line at once.
   */
  take(
    bytes: number,
    timeoutMs: number,
    timeout: () => Error,
    signal?: AbortSignal,
  ): Promise<() => void> {
    const now = this.tryTake(bytes);
    if (now) return Promise.resolve(now);
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const charge = this.#charge(bytes);
    return new Promise((resolve, reject) => {
      const leave = (err: unknown) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#queue.splice(this.#queue.indexOf(waiter), 1);
        this.#pump(); // the ones behind it may fit now
        reject(err);
      };
      const onAbort = () => leave(signal!.reason);
      const waiter: Waiter = {
        bytes: charge,
        grant: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          this.#used += charge;
          resolve(this.#giveBack(charge));
        },
      };
      const timer = setTimeout(() => leave(timeout()), timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(waiter);
    });
  }

  #charge(bytes: number): number {
    return Math.min(Math.max(0, bytes), this.limit);
  }

  #giveBack(charge: number): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#used -= charge;
      this.#pump();
    };
  }

  #fits(charge: number): boolean {
    return this.#used === 0 || this.#used + charge <= this.limit;
  }

  /** Grants the waiters at the head that fit now, in order. */
  #pump(): void {
    while (this.#queue.length > 0 && this.#fits(this.#queue[0]!.bytes)) {
      this.#queue.shift()!.grant();
    }
  }
}
