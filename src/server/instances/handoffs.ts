/**
 * Hand-offs (issue 23): an instance lent to a person for a while. Each has a token of its own
 * (never the instance's), valid while it is pending; the person sees the live view with the
 * message and presses Done, or it expires, or the instance stops first (`cancelled`). Callers
 * wait for the end with `wait` (a bounded long poll). Ended hand-offs are kept, a bounded number
 * per instance, so that a late status call still reads how it ended.
 *
 * The tokens are compared by the HTTP room (constant time, http/handoff.ts); this module only
 * keeps them. Live-view sockets opened with a hand-off's token are closed when it ends.
 */
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { Handoff, HandoffStatus } from '../../api/index.js';
import { serverError } from '../errors.js';
import { raceDeadline } from '../../internal/deadline.js';

/** Ended hand-offs kept per instance for status calls; older ones are forgotten. */
const KEEP_ENDED = 50;

export class HandoffRecord {
  status: HandoffStatus = 'pending';
  endedAt: Date | undefined;
  timer: NodeJS.Timeout | undefined;
  readonly waiters = new Set<() => void>();
  readonly sockets = new Set<Duplex>();

  constructor(
    readonly id: string,
    readonly instanceId: string,
    readonly token: string,
    readonly message: string,
    readonly createdAt: Date,
    readonly expiresAt: Date,
  ) {}

  toJSON(): Handoff {
    return {
      handoff_id: this.id,
      instance_id: this.instanceId,
      status: this.status,
      message: this.message,
      created_at: this.createdAt.toISOString(),
      expires_at: this.expiresAt.toISOString(),
      ended_at: this.endedAt?.toISOString() ?? null,
    };
  }
}

export class Handoffs {
  readonly #byInstance = new Map<string, Map<string, HandoffRecord>>();
  readonly #onEnd: (h: HandoffRecord) => void;

  /** `onEnd` hears every hand-off that ends (the registry counts it as activity). */
  constructor(onEnd: (h: HandoffRecord) => void = () => {}) {
    this.#onEnd = onEnd;
  }

  /** A new pending hand-off of `instanceId` that expires after `seconds`. */
  create(instanceId: string, message: string, seconds: number): HandoffRecord {
    const now = new Date();
    const h = new HandoffRecord(
      `ho_${randomBytes(8).toString('hex')}`,
      instanceId,
      randomBytes(24).toString('base64url'),
      message,
      now,
      new Date(now.getTime() + seconds * 1000),
    );
    let map = this.#byInstance.get(instanceId);
    if (!map) this.#byInstance.set(instanceId, (map = new Map()));
    map.set(h.id, h);
    h.timer = setTimeout(() => this.end(h, 'expired'), seconds * 1000);
    h.timer.unref();
    this.#trim(map);
    return h;
  }

  /** The hand-off, or 404 naming it. */
  get(instanceId: string, handoffId: string): HandoffRecord {
    const h = this.#byInstance.get(instanceId)?.get(handoffId);
    if (!h) throw serverError('handoff_not_found', { id: handoffId, instance: instanceId });
    return h;
  }

  /** The pending hand-offs of `instanceId` (whose tokens open its live view). */
  pending(instanceId: string): HandoffRecord[] {
    const map = this.#byInstance.get(instanceId);
    return map ? [...map.values()].filter((h) => h.status === 'pending') : [];
  }

  /** Resolves with the hand-off once it has ended, or after `seconds`, whichever comes first. */
  async wait(
    instanceId: string,
    handoffId: string,
    seconds: number,
    signal?: AbortSignal,
  ): Promise<HandoffRecord> {
    const h = this.get(instanceId, handoffId);
    if (h.status !== 'pending' || seconds <= 0) return h;
    let wake = () => {};
    const ended = new Promise<void>((resolve) => (wake = resolve));
    h.waiters.add(wake);
    try {
      // an abort ends the wait as the deadline does: the caller reads the hand-off as it is
      await raceDeadline(ended, seconds * 1000, { signal }).catch(() => undefined);
    } finally {
      h.waiters.delete(wake);
    }
    return h;
  }

  /** A live-view socket opened with the hand-off's token: closed when the hand-off ends. */
  attach(h: HandoffRecord, socket: Duplex): void {
    if (h.status !== 'pending') {
      socket.destroy();
      return;
    }
    h.sockets.add(socket);
    socket.once('close', () => h.sockets.delete(socket));
  }

  /** End `h` as `status` (false when it had ended already): its token stops working. */
  end(h: HandoffRecord, status: Exclude<HandoffStatus, 'pending'>): boolean {
    if (h.status !== 'pending') return false;
    h.status = status;
    h.endedAt = new Date();
    clearTimeout(h.timer);
    for (const wake of [...h.waiters]) wake();
    // the page's own Done request is answered before its sockets go
    const sockets = [...h.sockets];
    h.sockets.clear();
    setImmediate(() => sockets.forEach((s) => s.destroy()));
    this.#onEnd(h);
    return true;
  }

  /** The instance stopped: every pending hand-off of it is cancelled. */
  cancelAll(instanceId: string): void {
    for (const h of this.pending(instanceId)) this.end(h, 'cancelled');
  }

  #trim(map: Map<string, HandoffRecord>): void {
    const ended = [...map.values()].filter((h) => h.status !== 'pending');
    for (const h of ended.slice(0, Math.max(0, ended.length - KEEP_ENDED))) map.delete(h.id);
  }
}
