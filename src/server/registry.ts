/**
 * The instance registry and state machine (COMPAT.md "Instance lifecycle"):
 * `deploying → running ⇄ paused → terminated`, any live state → `error` when its processes die
 * on their own. Terminated instances stay listed. Expiry after `timeout_hours`; a resume restarts
 * the clock. The registry owns ids, tokens, directories and timers; runtimes own processes.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type {
  EndReason,
  Instance,
  InstanceLimits,
  InstanceStatus,
  InstanceType,
  Resolution,
} from '../api/index.js';
import { serverError } from './errors.js';
import type { InstanceRuntime, Logger, RuntimeContext, RuntimeFactory } from './runtime.js';
import type { SandboxHost } from './sandbox/index.js';

export const DEFAULT_RESOLUTION: Resolution = [1024, 768];
export const DEFAULT_TIMEOUT_HOURS = 1;
const HOUR_MS = 3_600_000;

export interface RegistryOptions {
  /** Directory for this server run's instance directories. */
  instancesDir: string;
  /** Live (deploying, running, paused) instances allowed at once. */
  maxInstances: number;
  factories: Partial<Record<InstanceType, RuntimeFactory>>;
  publicUrl: () => string;
  chromiumPath: string;
  maxUploadBytes: number;
  log: Logger;
  /** The sandbox layer (what this machine can isolate, limits, egress policy). */
  sandboxHost: SandboxHost;
  /**
   * Why an instance of `type` cannot start on this machine (a program it needs is missing:
   * requirements.ts), or undefined. Default: no check.
   */
  requirementsRefusal?: (type: InstanceType) => Promise<string | undefined>;
  /**
   * A file this run appends each instance's start and end to, so that the next server run can
   * still answer for them (`end_reason: "server_restart"`) after this process was killed.
   */
  journal?: string;
}

/** One line of the journal. */
export type JournalEntry =
  | { id: string; type: InstanceType; launch_time: string; resolution: Resolution }
  | { id: string; ended: EndReason };

export interface StartOptions {
  instance_type?: InstanceType | undefined;
  timeout_hours?: number | undefined;
  blocked_domains?: string[] | undefined;
  resolution?: Resolution | undefined;
}

export class InstanceRecord {
  status: InstanceStatus = 'deploying';
  expiresAt = 0;
  timer: NodeJS.Timeout | undefined;
  runtime: InstanceRuntime | undefined;
  stopping: Promise<void> | undefined;

  constructor(
    readonly id: string,
    readonly type: InstanceType,
    readonly launchTime: Date,
    readonly resolution: Resolution,
    readonly token: string,
    readonly dir: string,
  ) {}

  /** Why the instance ended (burrow extension), once it has. */
  endReason: EndReason | undefined;
  /** Its limits, kept after its runtime is gone. */
  limits: InstanceLimits | undefined;

  toJSON(): Instance {
    const limits = this.runtime?.limits ?? this.limits;
    return {
      id: this.id,
      launch_time: this.launchTime.toISOString(),
      instance_type: this.type,
      status: this.status,
      resolution: [...this.resolution],
      ...(limits && { limits }),
      ...(this.endReason && { end_reason: this.endReason }),
    };
  }

  get live(): boolean {
    return this.status === 'deploying' || this.status === 'running' || this.status === 'paused';
  }
}

export class Registry {
  readonly #instances = new Map<string, InstanceRecord>();
  readonly #opts: RegistryOptions;
  #closed = false;

  constructor(opts: RegistryOptions) {
    this.#opts = opts;
  }

  list(): InstanceRecord[] {
    return [...this.#instances.values()];
  }

  /** The record, or 404. */
  get(id: string): InstanceRecord {
    const rec = this.#instances.get(id);
    if (!rec) throw serverError('instance_not_found', { id });
    return rec;
  }

  /** The record and its runtime when the instance is running, or the 404/400 that says why not. */
  running(id: string): InstanceRecord & { runtime: InstanceRuntime } {
    const rec = this.get(id);
    if (rec.status !== 'running' || !rec.runtime) {
      const state = rec.status === 'deploying' ? 'still deploying' : rec.status;
      throw serverError('instance_not_running', { id, state });
    }
    return rec as InstanceRecord & { runtime: InstanceRuntime };
  }

  async start(options: StartOptions): Promise<InstanceRecord> {
    if (this.#closed) throw serverError('shutting_down');
    const type = options.instance_type ?? 'ubuntu';
    const factory = this.#opts.factories[type];
    if (!factory) throw serverError('instance_type_unavailable', { type });
    // a program the type needs is missing: 503 naming it, before anything of the instance exists
    const lacking = await this.#opts.requirementsRefusal?.(type);
    if (lacking) throw serverError('instance_requirements_missing', { detail: lacking });
    if (this.#closed) throw serverError('shutting_down');
    const { refusal } = this.#opts.sandboxHost;
    if (refusal) throw serverError('isolation_unavailable', { reason: refusal });
    const live = this.list().filter((r) => r.live).length;
    if (live >= this.#opts.maxInstances) {
      throw serverError('server_at_capacity', { live, limit: this.#opts.maxInstances });
    }
    const id = `inst_${randomBytes(8).toString('hex')}`;
    const rec = new InstanceRecord(
      id,
      type,
      new Date(),
      options.resolution ?? DEFAULT_RESOLUTION,
      randomBytes(24).toString('base64url'),
      join(this.#opts.instancesDir, id),
    );
    this.#instances.set(id, rec);
    this.#journal({
      id,
      type,
      launch_time: rec.launchTime.toISOString(),
      resolution: [...rec.resolution],
    });
    this.#arm(rec, options.timeout_hours ?? DEFAULT_TIMEOUT_HOURS);
    const ctx: RuntimeContext = {
      id,
      type,
      resolution: rec.resolution,
      blockedDomains: options.blocked_domains ?? [],
      dir: rec.dir,
      token: rec.token,
      publicUrl: this.#opts.publicUrl(),
      log: this.#opts.log,
      chromiumPath: this.#opts.chromiumPath,
      maxUploadBytes: this.#opts.maxUploadBytes,
      failed: (reason) => this.#failed(rec, reason),
      sandboxHost: this.#opts.sandboxHost,
    };
    try {
      await mkdir(rec.dir, { recursive: true, mode: 0o700 });
      rec.runtime = await factory(ctx);
      await rec.runtime.start();
    } catch (err) {
      this.#opts.log.error({ err, instance: id }, 'instance failed to start');
      rec.status = 'error';
      rec.endReason = 'crashed';
      await this.#teardown(rec);
      throw serverError('instance_failed_to_start', { id, reason: (err as Error).message });
    }
    if (rec.status === 'deploying') rec.status = 'running';
    else await this.#teardown(rec); // stopped or failed while deploying
    return rec;
  }

  async stop(id: string, reason: EndReason = 'stopped'): Promise<InstanceRecord> {
    const rec = this.get(id);
    if (rec.status === 'terminated') return rec;
    rec.status = 'terminated';
    rec.endReason ??= reason;
    await this.#teardown(rec);
    return rec;
  }

  async pause(id: string): Promise<InstanceRecord> {
    const rec = this.get(id);
    if (rec.status === 'paused') return rec;
    const { runtime } = this.running(id);
    await runtime.pause();
    rec.status = 'paused';
    return rec;
  }

  async resume(id: string, timeoutHours: number): Promise<InstanceRecord> {
    const rec = this.get(id);
    if (rec.status === 'paused' && rec.runtime) {
      await rec.runtime.resume();
      rec.status = 'running';
    } else if (rec.status !== 'running') {
      throw serverError('instance_not_paused', { id, status: rec.status });
    }
    this.#arm(rec, timeoutHours);
    return rec;
  }

  /**
   * Instances of an earlier server run that ended without stopping them (it was killed): they are
   * listed as terminated, with the reason they ended, `server_restart` unless the journal says.
   */
  adoptEnded(entries: readonly JournalEntry[]): void {
    const ended = new Map<string, EndReason>();
    for (const e of entries) if ('ended' in e) ended.set(e.id, e.ended);
    for (const e of entries) {
      if ('ended' in e || this.#instances.has(e.id)) continue;
      const rec = new InstanceRecord(e.id, e.type, new Date(e.launch_time), e.resolution, '', '');
      rec.status = 'terminated';
      rec.endReason = ended.get(e.id) ?? 'server_restart';
      this.#instances.set(e.id, rec);
    }
  }

  #journal(entry: JournalEntry): void {
    if (!this.#opts.journal) return;
    try {
      appendFileSync(this.#opts.journal, `${JSON.stringify(entry)}\n`, { mode: 0o600 });
    } catch (err) {
      this.#opts.log.warn({ err }, 'could not write the instance journal');
    }
  }

  /** Stop every live instance (server shutdown). */
  async close(): Promise<void> {
    this.#closed = true;
    const live = this.list().filter((r) => r.live);
    await Promise.all(live.map((r) => this.stop(r.id)));
    await Promise.all(this.list().map((r) => r.stopping ?? Promise.resolve()));
  }

  #arm(rec: InstanceRecord, hours: number): void {
    clearTimeout(rec.timer);
    const ms = hours * HOUR_MS;
    rec.expiresAt = Date.now() + ms;
    rec.timer = setTimeout(() => {
      if (!rec.live) return;
      this.#opts.log.info({ instance: rec.id }, 'instance expired');
      this.stop(rec.id, 'expired').catch((err: unknown) =>
        this.#opts.log.error({ err, instance: rec.id }, 'expiry stop failed'),
      );
    }, ms);
    rec.timer.unref();
  }

  #failed(rec: InstanceRecord, reason: string): void {
    if (!rec.live) return;
    this.#opts.log.warn({ instance: rec.id, reason }, 'instance failed');
    rec.status = 'error';
    rec.endReason = 'crashed';
    void this.#teardown(rec);
  }

  /** Kill processes, then remove the directory. Memoised: concurrent callers share one promise. */
  #teardown(rec: InstanceRecord): Promise<void> {
    clearTimeout(rec.timer);
    rec.stopping ??= (async () => {
      this.#journal({ id: rec.id, ended: rec.endReason ?? 'stopped' });
      rec.limits = rec.runtime?.limits;
      try {
        await rec.runtime?.stop();
      } catch (err) {
        this.#opts.log.error({ err, instance: rec.id }, 'runtime stop failed');
      }
      await rm(rec.dir, { recursive: true, force: true, maxRetries: 3 });
    })();
    return rec.stopping;
  }
}
