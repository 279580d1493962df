/**
 * When a start refused for lack of room is worth asking again: the `Retry-After` of a full
 * cluster (`cluster_at_capacity`, ../cluster/placement.ts) and of a single node at its own cap
 * (`server_at_capacity`, registry.ts), with or without `--cluster`. Both come from the same two
 * estimates, so a client reads one meaning whichever refused it. It lives with the instances
 * (the floor below the cluster), so that the registry can use it.
 */

/** What the Retry-After of a full cluster or node is computed from. */
export interface ClusterLoad {
  /** Instances that must end before a start fits (1 when every node is full). */
  needed: number;
  /** Seconds until each live instance's deadline (`expires_at`), any order. */
  secondsToDeadline: readonly number[];
  /** Instances that ended in the last `windowSeconds`. */
  recentEnds: number;
  windowSeconds: number;
}

export const RETRY_AFTER_MIN_SECONDS = 1;
export const RETRY_AFTER_MAX_SECONDS = 300;

/** The window of recent ends the rate estimate looks at. */
export const END_WINDOW_SECONDS = 600;

/**
 * Seconds a client refused by a full cluster (or node) should wait: the sooner of two estimates
 * of when `needed` instances will have ended, clamped to [1, 300].
 *
 * - **Deadlines:** the `needed`-th soonest `expires_at` among live instances (an instance ends
 *   at its deadline at the latest).
 * - **Rate:** with `e` ends in the last `W` seconds, ends come about every `W / e` seconds, so
 *   `needed` of them take `needed · W / e` (no estimate when nothing ended).
 *
 * With neither (no deadline known, nothing ended lately) it is the upper bound: the cluster
 * is busy with long instances, and asking often would not help. A heavier load (more
 * instances to wait for, later deadlines, fewer recent ends) gives a longer wait.
 */
export function retryAfterSeconds(load: ClusterLoad): number {
  const needed = Math.max(1, Math.ceil(load.needed));
  const estimates: number[] = [];
  const deadlines = [...load.secondsToDeadline].filter(Number.isFinite).sort((a, b) => a - b);
  if (deadlines.length >= needed) estimates.push(deadlines[needed - 1]!);
  if (load.recentEnds > 0 && load.windowSeconds > 0) {
    estimates.push((needed * load.windowSeconds) / load.recentEnds);
  }
  const wait = estimates.length > 0 ? Math.min(...estimates) : RETRY_AFTER_MAX_SECONDS;
  return Math.min(
    RETRY_AFTER_MAX_SECONDS,
    Math.max(RETRY_AFTER_MIN_SECONDS, Math.ceil(Number.isFinite(wait) ? wait : 0)),
  );
}

/**
 * The ends of a single node's instances in the last `END_WINDOW_SECONDS` (its registry's
 * count; a full cluster reads its instance rows instead): the rate half of its Retry-After.
 */
export class RecentEnds {
  readonly #windowMs: number;
  /** End times (ms, this process's clock), oldest first. */
  #ends: number[] = [];

  constructor(windowSeconds = END_WINDOW_SECONDS) {
    this.#windowMs = windowSeconds * 1000;
  }

  get windowSeconds(): number {
    return this.#windowMs / 1000;
  }

  /** An instance ended at `at` (default now). */
  record(at = Date.now()): void {
    this.#ends.push(at);
    this.#prune(at);
  }

  /** Ends within the window before `now`. */
  count(now = Date.now()): number {
    this.#prune(now);
    return this.#ends.length;
  }

  #prune(now: number): void {
    const since = now - this.#windowMs;
    let drop = 0;
    while (drop < this.#ends.length && this.#ends[drop]! <= since) drop++;
    if (drop > 0) this.#ends.splice(0, drop);
  }
}

/**
 * A single node's load at its cap: `live` instances against `limit`, their deadlines (ms since
 * the epoch, this process's clock) and its recent ends.
 */
export function nodeLoad(
  live: number,
  limit: number,
  deadlines: readonly number[],
  ends: RecentEnds,
  now = Date.now(),
): ClusterLoad {
  return {
    needed: Math.max(1, live - limit + 1),
    secondsToDeadline: deadlines.map((at) => Math.max(0, (at - now) / 1000)),
    recentEnds: ends.count(now),
    windowSeconds: ends.windowSeconds,
  };
}
