/**
 * The life cycle of an instance (COMPAT.md "Instance lifecycle", six statuses): the table of the
 * moves it can make, and the one function that makes them. Every status change of the registry
 * goes through `transition` (called by its listing, listing.ts), which refuses a move the table
 * lacks: two things racing to change an instance (a stop during a start, a crash during a pause)
 * cannot both win, and the loser sees `false` instead of overwriting what happened.
 *
 *   warm_pool ──claim──▶ deploying ──▶ running ◀──▶ paused
 *       │                    │            │           │
 *       └────────────────────┴─────┬──────┴───────────┘
 *                                  ▼
 *                     terminated  ◀──stop──  error
 */
import type { EndReason, InstanceStatus } from '../../api/index.js';

/** Where each status may go next. Nothing leaves `terminated`. */
export const TRANSITIONS: Readonly<Record<InstanceStatus, readonly InstanceStatus[]>> = {
  // started ahead of demand, unlisted: claimed by a start, or ended
  warm_pool: ['deploying', 'terminated', 'error'],
  deploying: ['running', 'terminated', 'error'],
  running: ['paused', 'terminated', 'error'],
  paused: ['running', 'terminated', 'error'],
  // a stop acknowledges a failed instance; it keeps `crashed` as its end reason
  error: ['terminated'],
  terminated: [],
};

/** The statuses counted against the instance cap: started by a caller and not ended. */
export const LIVE_STATUSES: ReadonlySet<InstanceStatus> = new Set([
  'deploying',
  'running',
  'paused',
]);

/**
 * An instance's status and, once it ended, why. Read-only to everyone: only `transition` moves
 * it, and only the registry's listing (listing.ts) calls that.
 */
export class Lifecycle {
  #status: InstanceStatus;
  #endReason: EndReason | undefined;

  constructor(status: InstanceStatus, endReason?: EndReason) {
    this.#status = status;
    this.#endReason = endReason;
  }

  get status(): InstanceStatus {
    return this.#status;
  }

  /** Why the instance ended (burrow extension); set once, by the move that ended it. */
  get endReason(): EndReason | undefined {
    return this.#endReason;
  }

  get live(): boolean {
    return LIVE_STATUSES.has(this.#status);
  }

  /**
   * Move `life` to `to`, recording `reason` when this move ends it (`terminated` or `error`) and
   * it has no reason yet. False, changing nothing, when the table has no such move: the instance
   * is no longer where the caller last saw it.
   */
  static transition(life: Lifecycle, to: InstanceStatus, reason?: EndReason): boolean {
    if (!TRANSITIONS[life.#status].includes(to)) return false;
    life.#status = to;
    if (reason !== undefined && (to === 'terminated' || to === 'error')) life.#endReason ??= reason;
    return true;
  }
}

export const transition = Lifecycle.transition;
