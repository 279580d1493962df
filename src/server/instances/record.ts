/**
 * An instance as the registry keeps it: its status (state.ts), what its row in the store shows,
 * and the state its clocks (clocks.ts) keep. Everyone but the registry gets it read-only
 * (`InstanceView`).
 */
import type {
  EndReason,
  Instance,
  InstanceLimits,
  InstanceStatus,
  InstanceType,
  Resolution,
} from '../../api/index.js';
import type { InstanceRuntime } from './runtime.js';
import { LIVE_STATUSES, Lifecycle } from './state.js';
import type { InstanceRow } from './store.js';

/** Events kept per instance (the oldest go first). */
const MAX_EVENTS = 50;

export class InstanceRecord extends Lifecycle {
  timer: NodeJS.Timeout | undefined;
  /** What happened to it that no call answered for (`InstanceServices.event`), oldest first. */
  readonly events: { at: string; type: string; message: string }[] = [];
  /** When the expiry timer fires (set by every arming of it). */
  expiresAt: Date | undefined;
  /** The idle timeout in ms, when it was started with one. */
  idleMs: number | undefined;
  idleTimer: NodeJS.Timeout | undefined;
  /** When the last API call for it was made, or its last client went (ms since the epoch). */
  lastActivity = Date.now();
  /** Open CDP and live-view connections. */
  clients = 0;
  runtime: InstanceRuntime | undefined;
  stopping: Promise<void> | undefined;

  constructor(
    readonly id: string,
    readonly type: InstanceType,
    /** When it was started, or for a pooled instance, claimed. */
    public launchTime: Date,
    public resolution: Resolution,
    readonly token: string,
    readonly dir: string,
    status: InstanceStatus = 'deploying',
    endReason?: EndReason,
  ) {
    super(status, endReason);
  }

  /** Its limits, kept after its runtime is gone. */
  limits: InstanceLimits | undefined;
  /** The upstream proxy's address (`scheme://host:port`), never its credentials. */
  proxyServer: string | undefined;

  /** Keep an event (the newest `MAX_EVENTS`). */
  note(type: string, message: string): void {
    this.events.push({ at: new Date().toISOString(), type, message });
    if (this.events.length > MAX_EVENTS) this.events.splice(0, this.events.length - MAX_EVENTS);
  }

  toJSON(): Instance {
    return { ...this.row() };
  }

  /** What the store keeps of it (store.ts). */
  row(): InstanceRow {
    const limits = this.runtime?.limits ?? this.limits;
    return {
      id: this.id,
      launch_time: this.launchTime.toISOString(),
      instance_type: this.type,
      status: this.status,
      resolution: [...this.resolution],
      ...(limits && { limits }),
      ...(this.endReason && { end_reason: this.endReason }),
      ...(this.proxyServer !== undefined && { proxy: { server: this.proxyServer } }),
      ...(this.live && this.expiresAt && { expires_at: this.expiresAt.toISOString() }),
      ...(this.idleMs !== undefined && { idle_timeout_seconds: this.idleMs / 1000 }),
      ...(this.events.length > 0 && { events: this.events.map((e) => ({ ...e })) }),
    };
  }
}

/**
 * `row` with the seconds left until its `expires_at`, while it is live; an ended one shows no
 * deadline (a row a killed run left in the store may still carry one).
 */
export function withTimeLeft(row: Instance): Instance {
  if (!LIVE_STATUSES.has(row.status)) {
    const { expires_at: _stale, ...ended } = row;
    return ended;
  }
  if (!row.expires_at) return row;
  const left = Math.max(0, Math.round((Date.parse(row.expires_at) - Date.now()) / 1000));
  return { ...row, time_left_seconds: left };
}

/** A record as handlers, routes and the server see it: nothing of it can be changed there. */
export type InstanceView = Readonly<InstanceRecord>;
