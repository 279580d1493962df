/**
 * The instance registry: the life cycle of instances (whether a start may go ahead, pause,
 * resume, extend, stop, teardown) behind the methods the server calls; runtimes own the
 * processes. Its parts live beside it: the plan of a start (plan.ts: defaults, identity, what a
 * warm instance serves, the upstream proxy), how an instance comes to be (starts.ts: cold starts,
 * pool fills, claims), the listed instances and their rows in the store (listing.ts: every status
 * change goes through `move`), their clocks (clocks.ts: expiry and idle), and the status guard of
 * its operations (guard.ts). Hand-offs to a person (handoffs.ts) end with the instance.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { EndReason, Instance, InstanceStatus, RunnableInstanceType } from '../../api/index.js';
import { HttpError, serverError } from '../errors.js';
import { SandboxStock } from '../sandbox/index.js';
import { InstanceClocks } from './clocks.js';
import { refusal, requireStatus, type GuardedAction } from './guard.js';
import { Handoffs } from './handoffs.js';
import { Listing } from './listing.js';
import type { RegistryOptions } from './options.js';
import { resolveUpstream, type StartPlan } from './plan.js';
import { WarmPool } from './pool.js';
import { withTimeLeft, type InstanceRecord, type InstanceView } from './record.js';
import { nodeLoad, RecentEnds, retryAfterSeconds } from './retry-after.js';
import { LIVE_STATUSES } from './state.js';
import type { CapabilityName, InstanceRuntime, StartResources } from './runtime.js';
import { InstanceStarts } from './starts.js';

export { DEFAULT_RESOLUTION, DEFAULT_TIMEOUT_HOURS } from './plan.js';
export { InstanceRecord, type InstanceView } from './record.js';
export type { RegistryOptions } from './options.js';
export type { WarmPoolSizes } from './pool.js';

export class Registry {
  readonly #opts: RegistryOptions;
  /** The listed instances and their rows in the store (listing.ts). */
  readonly #listing: Listing;
  /** Expiry and idle timers (clocks.ts). */
  readonly #clocks: InstanceClocks;
  /** Ends of listed instances lately: the cap's Retry-After (`#atCapacity`). */
  readonly #ends = new RecentEnds();
  #closed = false;

  readonly #pool: WarmPool<InstanceRecord>;
  readonly #stock: SandboxStock;
  /** Cold starts, pooled ones and claims (starts.ts). */
  readonly #starts: InstanceStarts;
  /** Hand-offs to a person (handoffs.ts); one that ends counts as activity of its instance. */
  readonly handoffs = new Handoffs((h) => this.touch(h.instanceId));

  constructor(opts: RegistryOptions) {
    this.#opts = opts;
    this.#listing = new Listing({ log: opts.log, store: opts.store, changed: opts.changed });
    this.#clocks = new InstanceClocks({
      log: opts.log,
      expire: (id, reason) => this.stop(id, reason),
      handedOff: (id) => this.handoffs.pending(id).length > 0,
    });
    this.#pool = new WarmPool({
      sizes: opts.warmPool ?? {},
      log: opts.log,
      room: () => opts.maxInstances - this.#listing.liveCount(),
      fill: (type) => this.#starts.fill(type),
      evict: (rec) => {
        this.#listing.move(rec, 'terminated', 'stopped');
        return this.#teardown(rec);
      },
    });
    this.#stock = new SandboxStock({
      host: opts.sandboxHost,
      size: opts.sandboxStock ?? 0,
      mint: () => this.mintId(),
      dirOf: (id) => join(opts.instancesDir, id),
      ...(opts.stockPrepare && { prepare: opts.stockPrepare }),
      log: opts.log,
    });
    this.#starts = new InstanceStarts({
      registry: opts,
      listing: this.#listing,
      clocks: this.#clocks,
      pool: this.#pool,
      stock: this.#stock,
      closed: () => this.#closed,
      teardown: (rec) => this.#teardown(rec),
      failed: (rec, reason) => this.#failed(rec, reason),
    });
  }

  /**
   * A new instance id (its sandbox may be made ahead with it: sandbox/stock.ts; the sandbox a
   * profile template is made in is named by one too, so that the sweeps know it).
   */
  mintId(): string {
    return this.#starts.mintId();
  }

  /** Instances waiting in the warm pool, by type (they are not listed). */
  get pooled(): Record<RunnableInstanceType, number> {
    return this.#pool.counts();
  }

  /** Live instances, the ones the cap counts (the warm pool's are not). */
  get liveCount(): number {
    return this.#listing.liveCount();
  }

  /** Ids of the instances waiting in the warm pool (diagnostics and tests; never listed). */
  pooledIds(): string[] {
    return this.#pool.list().map((r) => r.id);
  }

  list(): InstanceView[] {
    return this.#listing.records();
  }

  /** The listing as the store has it (`GET /v1/instances`), as a client was last told. */
  rows(): Promise<Instance[]> {
    return this.#listing.rows();
  }

  /** Row `id` as the store has it (`GET /v1/instance/{id}`), or 404. */
  row(id: string): Promise<Instance> {
    return this.#listing.row(id);
  }

  /** `rec` as the API answers it: its row, with the seconds left while it is live. */
  view(rec: InstanceView): Instance {
    return withTimeLeft(rec.toJSON());
  }

  /** The record, or 404. */
  get(id: string): InstanceView {
    return this.#listing.get(id);
  }

  /**
   * The record `id` when its status is one of `statuses`, else the answer `action` gives
   * (guard.ts); 404 for an unknown id.
   */
  #require(id: string, action: GuardedAction, ...statuses: InstanceStatus[]): InstanceRecord {
    return requireStatus(this.#listing.get(id), action, ...statuses);
  }

  /** The record and its runtime when the instance is running, or the 404/400 that says why not. */
  running(id: string): InstanceView & { readonly runtime: InstanceRuntime } {
    const rec = this.#require(id, 'use', 'running');
    if (!rec.runtime) throw refusal('use', rec);
    return rec as InstanceRecord & { runtime: InstanceRuntime };
  }

  /**
   * The capability `key` of a running instance, or the 404/400 that says why not: the 400 names
   * `what` was asked and the instance type, when the type lacks it.
   */
  capability<K extends CapabilityName>(
    id: string,
    key: K,
    what: string,
  ): NonNullable<InstanceRuntime[K]> {
    const rec = this.running(id);
    const cap = rec.runtime[key];
    if (cap === undefined) throw serverError('capability_unavailable', { what, type: rec.type });
    return cap as NonNullable<InstanceRuntime[K]>;
  }

  /**
   * Starts the instance `plan` describes (plan.ts), with what the caller resolved and holds for
   * it (`resources`: extensions, a profile). A warm-pool instance serves it when the plan says it
   * can (`StartPlan.warm`) and one is ready.
   */
  async start(plan: StartPlan, resources: StartResources = {}): Promise<InstanceView> {
    if (this.#closed) throw serverError('shutting_down');
    const { type } = plan;
    const factory = this.#opts.factories[type];
    if (!factory) throw serverError('instance_type_unavailable', { type });
    // a program the type needs is missing: 503 naming it, before anything of the instance exists
    const lacking = await this.#opts.requirementsRefusal?.(type);
    if (lacking) throw serverError('instance_requirements_missing', { detail: lacking });
    if (this.#closed) throw serverError('shutting_down');
    const { refusal: isolation } = this.#opts.sandboxHost;
    if (isolation) throw serverError('isolation_unavailable', { reason: isolation });
    await this.#opts.admission?.();
    const live = this.#listing.liveCount();
    if (live >= this.#opts.maxInstances) throw this.#atCapacity(live);
    const upstream = await resolveUpstream(plan.proxy, this.#opts.sandboxHost);
    const pooled = plan.warm ? this.#pool.take(type, plan.resolution) : undefined;
    if (pooled) {
      const rec = await this.#starts.claim(pooled, plan, upstream);
      this.#pool.refill();
      if (rec) return rec;
      // it could not take these options: start a fresh one instead (the room is still ours)
    }
    // a cold start must not push the machine past the cap: a pooled instance gives way
    this.#pool.makeRoom();
    try {
      return await this.#starts.cold(factory, plan, upstream, resources);
    } finally {
      // not while the start runs, nor while its client connects: it would take their CPU
      this.#stock.refillAfterStart();
    }
  }

  /**
   * The 429 of this node at its cap, its Retry-After computed as a full cluster's is (the sooner
   * of its instances' deadlines and its recent end rate: retry-after.ts).
   */
  #atCapacity(live: number): HttpError {
    const limit = this.#opts.maxInstances;
    const deadlines: number[] = [];
    for (const r of this.#listing.records()) {
      if (r.live && r.expiresAt) deadlines.push(r.expiresAt.getTime());
    }
    const seconds = retryAfterSeconds(nodeLoad(live, limit, deadlines, this.#ends));
    const err = serverError('server_at_capacity', { live, limit, seconds });
    return new HttpError(err.code, err.detail, err.status, { 'Retry-After': String(seconds) });
  }

  /**
   * Stop an instance. It is unusable when this returns (status `terminated`, its token refused,
   * its CDP and live-view connections closed); its processes and disk go in the background, and
   * `close()` waits for them.
   */
  async stop(id: string, reason: EndReason = 'stopped'): Promise<InstanceView> {
    const rec = this.#listing.get(id);
    if (!this.#listing.move(rec, 'terminated', reason)) return rec; // already terminated
    try {
      rec.runtime?.revoke?.();
    } catch (err) {
      this.#opts.log.warn({ err, instance: id }, 'closing client connections failed');
    }
    void this.#teardown(rec);
    return rec;
  }

  async pause(id: string): Promise<InstanceView> {
    const rec = this.#require(id, 'pause', 'running', 'paused');
    if (rec.status === 'paused') return rec;
    if (!rec.runtime) throw refusal('pause', rec);
    await rec.runtime.pause();
    this.#listing.move(rec, 'paused'); // refused when it was stopped or failed meanwhile: that stands
    return rec;
  }

  async resume(id: string, timeoutHours: number): Promise<InstanceView> {
    const rec = this.#require(id, 'resume', 'paused', 'running');
    if (rec.status === 'paused') {
      if (!rec.runtime) throw refusal('resume', rec);
      await rec.runtime.resume();
      this.#listing.move(rec, 'running');
    }
    this.#clocks.expireIn(rec, timeoutHours);
    this.#listing.save(rec);
    return rec;
  }

  /**
   * Set the deadline of a live instance to `hours` from now (as a resume does; it replaces what
   * was left rather than adding to it, so it can also shorten it). 410 once it has ended.
   */
  extend(id: string, hours: number): InstanceView {
    const rec = this.#require(id, 'extend', ...LIVE_STATUSES);
    this.#clocks.expireIn(rec, hours);
    this.#listing.save(rec);
    return rec;
  }

  /** An API call for instance `id` (unknown ids are ignored): its idle clock starts again. */
  touch(id: string): void {
    const rec = this.#listing.find(id);
    if (rec) this.#clocks.touch(rec);
  }

  /**
   * A CDP or live-view client of `id` connected: the instance is not idle while it stays.
   * Returns what to call once it has gone.
   */
  connected(id: string): () => void {
    const rec = this.#listing.find(id);
    return rec ? this.#clocks.connected(rec) : () => {};
  }

  /**
   * Instances of earlier server runs that ended without stopping them, listed as terminated
   * (listing.ts). Call once, before the first start.
   */
  adopt(): Promise<void> {
    return this.#listing.adopt();
  }

  /**
   * Resolves once the rows queued so far are in the store, or after a bounded wait when the store
   * does not answer (listing.ts): a start's or a stop's answer waits for it.
   */
  flushed(): Promise<void> {
    return this.#listing.flushed();
  }

  /** Resolves once the warm pool is as full as the cap allows. */
  poolReady(): Promise<void> {
    return this.#pool.full();
  }

  /** Start keeping the warm pool filled (once the server knows its public URL). */
  startPool(): void {
    this.#pool.refill();
    this.#stock.refill();
  }

  /** Sandboxes made ahead and ready now (sandbox/stock.ts), by the ids they will give. */
  stockedIds(): string[] {
    return this.#stock.names();
  }

  /** Resolves once the stock of sandboxes made ahead is full (tests, benchmarks). */
  stockReady(): Promise<void> {
    return this.#stock.filled();
  }

  /**
   * Stop filling the warm pool and tear down what waits in it (a drain: cluster/drain.ts); the
   * listed instances go on.
   */
  async closePool(): Promise<void> {
    const pooled = this.#pool.close();
    await Promise.all([
      ...pooled.map((r) => this.#teardown(r)),
      this.#pool.idle(),
      this.#stock.close(),
    ]);
  }

  /** Stop every live instance and the pool (server shutdown). */
  async close(): Promise<void> {
    this.#closed = true;
    const pooled = this.#pool.close();
    for (const r of this.list()) if (r.live) await this.stop(r.id);
    await Promise.all([
      ...this.list().map((r) => r.stopping),
      ...pooled.map((r) => this.#teardown(r)),
      this.#pool.idle(), // a fill in flight ends with its instance torn down
      this.#stock.close(),
    ]);
    await this.#listing.close();
  }

  #failed(rec: InstanceRecord, reason: string): void {
    const pooled = rec.status === 'warm_pool';
    if (!this.#listing.move(rec, 'error', 'crashed')) return; // it had ended already
    this.#opts.log.warn(
      { instance: rec.id, reason },
      `${pooled ? 'a pooled ' : ''}instance failed`,
    );
    if (pooled) this.#pool.drop(rec);
    void this.#teardown(rec);
  }

  /** Kill processes, then remove the directory. Memoised: concurrent callers share one promise. */
  #teardown(rec: InstanceRecord): Promise<void> {
    this.#clocks.stop(rec);
    this.handoffs.cancelAll(rec.id);
    rec.stopping ??= (async () => {
      // a pooled instance that was never claimed was never in the store
      if (this.#listing.has(rec)) {
        this.#ends.record(); // the rate half of the cap's Retry-After
        this.#listing.ended(rec, rec.endReason ?? 'stopped');
      }
      rec.limits = rec.runtime?.limits;
      try {
        await rec.runtime?.stop();
      } catch (err) {
        this.#opts.log.error({ err, instance: rec.id }, 'runtime stop failed');
      }
      await rm(rec.dir, { recursive: true, force: true, maxRetries: 3 });
      this.#pool.refill(); // its room under the cap is free again
    })();
    return rec.stopping;
  }
}
