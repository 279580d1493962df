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

  /**
   * Resolves once `bytes` are held for the caller (at once when they fit and nobody waits
   * before), with the function giving them back (idempotent). Rejects with `timeout()`'s error
   * after `timeoutMs` of waiting, holding nothing.
   */
  take(bytes: number, timeoutMs: number, timeout: () => Error): Promise<() => void> {
    const charge = Math.min(Math.max(0, bytes), this.limit);
    let given = false;
    const giveBack = () => {
      if (given) return;
      given = true;
      this.#used -= charge;
      this.#pump();
    };
    if (this.#queue.length === 0 && this.#fits(charge)) {
      this.#used += charge;
      return Promise.resolve(giveBack);
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        bytes: charge,
        grant: () => {
          clearTimeout(timer);
          this.#used += charge;
          resolve(giveBack);
        },
      };
      const timer = setTimeout(() => {
        this.#queue.splice(this.#queue.indexOf(waiter), 1);
        this.#pump(); // the ones behind it may fit now
        reject(timeout());
      }, timeoutMs);
      this.#queue.push(waiter);
    });
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
