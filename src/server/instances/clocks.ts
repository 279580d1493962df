/**
 * The clocks of listed instances: expiry after `timeout_hours` (a resume or an `extend` sets the
 * deadline again, counted from that moment, so it can also shorten it), and with
 * `idle_timeout_seconds`, the idle clock: an instance that has had no API call and no CDP or
 * live-view client for that long is stopped as `idle`; a paused one, one still starting and one
 * with a person's hand-off pending are not idle. The clocks only ask for the stop (`expire`); the
 * registry makes it. Their state is kept on the record (record.ts).
 */
import type { EndReason } from '../../api/index.js';
import type { Logger } from '../../internal/log.js';
import type { InstanceRecord } from './record.js';

const HOUR_MS = 3_600_000;

export interface ClocksOptions {
  log: Logger;
  /** Stop the instance, having run out of time (`expired`) or been idle (`idle`). */
  expire(id: string, reason: Extract<EndReason, 'expired' | 'idle'>): Promise<unknown>;
  /** Whether a person's hand-off of the instance is pending (it keeps it from being idle). */
  handedOff(id: string): boolean;
}

export class InstanceClocks {
  readonly #opts: ClocksOptions;

  constructor(opts: ClocksOptions) {
    this.#opts = opts;
  }

  /**
   * Start the clocks of `rec`, just listed: expiry in `hours`, and the idle clock when
   * `idleSeconds` is given (its activity counted from now).
   */
  start(rec: InstanceRecord, hours: number, idleSeconds: number | undefined): void {
    this.expireIn(rec, hours);
    if (idleSeconds !== undefined) {
      rec.idleMs = idleSeconds * 1000;
      rec.lastActivity = Date.now();
      this.#armIdle(rec, rec.idleMs);
    }
  }

  /** Set the deadline of `rec` to `hours` from now, replacing the one it had. */
  expireIn(rec: InstanceRecord, hours: number): void {
    clearTimeout(rec.timer);
    const ms = hours * HOUR_MS;
    rec.expiresAt = new Date(Date.now() + ms);
    rec.timer = setTimeout(() => {
      if (!rec.live) return;
      this.#opts.log.info({ instance: rec.id }, 'instance expired');
      this.#opts
        .expire(rec.id, 'expired')
        .catch((err: unknown) =>
          this.#opts.log.error({ err, instance: rec.id }, 'expiry stop failed'),
        );
    }, ms);
    rec.timer.unref();
  }

  /** An API call for `rec`, or it became ready: its idle clock starts again. */
  touch(rec: InstanceRecord): void {
    rec.lastActivity = Date.now();
  }

  /**
   * A CDP or live-view client of `rec` connected: it is not idle while it stays. Returns what to
   * call once it has gone (idempotent).
   */
  connected(rec: InstanceRecord): () => void {
    rec.clients++;
    let gone = false;
    return () => {
      if (gone) return;
      gone = true;
      rec.clients--;
      rec.lastActivity = Date.now();
    };
  }

  /** Both clocks of `rec` stopped (it ends). */
  stop(rec: InstanceRecord): void {
    clearTimeout(rec.timer);
    clearTimeout(rec.idleTimer);
  }

  /**
   * Check `rec` for idleness in `ms`: stopped as `idle` when nothing happened for its idle
   * timeout; a client connected, or a pause, counts as activity.
   */
  #armIdle(rec: InstanceRecord, ms: number): void {
    clearTimeout(rec.idleTimer);
    rec.idleTimer = setTimeout(() => {
      const idleMs = rec.idleMs;
      if (!rec.live || idleMs === undefined) return;
      const now = Date.now();
      // a client, a pause, a start still going or a person's pending hand-off: not idle
      const busy = rec.clients > 0 || rec.status !== 'running' || this.#opts.handedOff(rec.id);
      if (busy) rec.lastActivity = now;
      const left = rec.lastActivity + idleMs - now;
      if (left > 0) return this.#armIdle(rec, left);
      this.#opts.log.info({ instance: rec.id, idle_seconds: idleMs / 1000 }, 'instance idle');
      this.#opts
        .expire(rec.id, 'idle')
        .catch((err: unknown) =>
          this.#opts.log.error({ err, instance: rec.id }, 'idle stop failed'),
        );
    }, ms);
    rec.idleTimer.unref();
  }
}
