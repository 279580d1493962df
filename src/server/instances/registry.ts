/**
 * The instance registry: ids, tokens, directories and timers; runtimes own the processes, the
 * instance store (store.ts) the rows a listing shows and a later run adopts. Every status change
 * goes through `transition` (state.ts holds the table of the life cycle), and the row it leaves
 * is written to the store; the listing and `GET /v1/instance/{id}` read the store back (`rows`,
 * `row`), so another store (a shared table) answers them without the registry changing.
 * Terminated instances stay listed. Expiry after `timeout_hours`; a resume or an `extend` sets
 * the deadline again, counted from that moment. With `idle_timeout_seconds`, an instance that
 * has had no API call and no CDP or live-view client for that long is stopped as `idle`; a
 * paused one is not idle. Hand-offs to a person (handoffs.ts) end with the instance.
 */
import { identityOf } from '../../api/identity.js';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type {
  EndReason,
  Instance,
  InstanceLimits,
  InstanceStatus,
  InstanceType,
  Resolution,
  RunnableInstanceType,
  StartRequest,
} from '../../api/index.js';
import { HttpError, serverError } from '../errors.js';
import { nodeLoad, RecentEnds, retryAfterSeconds } from './retry-after.js';
import type {
  CapabilityName,
  InstanceRuntime,
  Logger,
  RuntimeContext,
  RuntimeFactory,
  StartExtras,
} from './runtime.js';
import {
  probeUpstream,
  SandboxStock,
  upstreamFromSettings,
  upstreamLabel,
  type Sandbox,
  type SandboxHost,
  type UpstreamProxy,
} from '../sandbox/index.js';
import type { ProgramPaths } from '../config.js';
import { Handoffs } from './handoffs.js';
import { WarmPool, type WarmPoolSizes } from './pool.js';
import { Lifecycle, transition } from './state.js';
import { MemoryInstanceStore, type InstanceRow, type InstanceStore } from './store.js';

export const DEFAULT_RESOLUTION: Resolution = [1024, 768];

/**
 * How many times a cold start is tried. A machine that fails to boot is replaced once by a fresh
 * one: nobody holds the failed instance's id yet; a second failure is answered with its reason.
 * (The failure this was added for, processes SIGKILLed as they started, was bubblewrap's
 * `--die-with-parent` racing its own intermediate process; see sandbox/sandbox.ts. The retry
 * stays for starts that fail for a passing reason.)
 */
const START_ATTEMPTS = 2;
export const DEFAULT_TIMEOUT_HOURS = 1;
const HOUR_MS = 3_600_000;
/** How long `flushed()` waits at most for a store that does not answer. */
const FLUSH_WAIT_MS = 2_000;

export interface RegistryOptions {
  /** Directory for this server run's instance directories. */
  instancesDir: string;
  /** Live (deploying, running, paused) instances allowed at once. */
  maxInstances: number;
  factories: Partial<Record<InstanceType, RuntimeFactory>>;
  publicUrl: () => string;
  chromiumPath: string;
  /** Chromium's operator flags, Xvfb and x11vnc (src/server/config.ts). Default `DEFAULT_PROGRAMS`. */
  programs?: ProgramPaths;
  maxUploadBytes: number;
  log: Logger;
  /** The sandbox layer (what this machine can isolate, limits, egress policy). */
  sandboxHost: SandboxHost;
  /**
   * Why an instance of `type` cannot start on this machine (a program it needs is missing:
   * requirements.ts), or undefined. Default: no check.
   */
  requirementsRefusal?: (type: InstanceType) => Promise<string | undefined>;
  /** Instances kept started per type for `start` to claim (pool.ts). Default none. */
  warmPool?: WarmPoolSizes;
  /**
   * Sandboxes made ahead for starts the warm pool does not serve (sandbox/stock.ts), named by
   * ids minted here. Default none.
   */
  sandboxStock?: number;
  /**
   * What a sandbox made ahead gets written into it before it is ready (the stock's `prepare`,
   * sandbox/stock.ts), e.g. a Chromium profile's skeleton. Default nothing.
   */
  stockPrepare?: (sandbox: Sandbox) => Promise<void>;
  /**
   * Where the rows of listed instances are written, and the earlier runs' rows come from
   * (`adopt`). Default: a `MemoryInstanceStore` without a journal.
   */
  store?: InstanceStore;
  /** A new instance id; default `inst_` and 16 random hex digits (a cluster's ids: cluster/ids.ts). */
  newId?: () => string;
  /**
   * Whether this server can take a start now, beyond its own cap: rejects with the answer for
   * the client (a cluster node whose database does not answer: cluster/node.ts). Default: yes.
   */
  admission?: () => Promise<void>;
  /**
   * Something the cap counts changed: an instance moved (started, claimed, ended) or the warm
   * pool gained one. Called often; a cluster node publishes its free slots from it, debounced.
   */
  changed?: () => void;
}

export type { WarmPoolSizes } from './pool.js';

/** An instance as the registry keeps it; everyone else gets it read-only (`InstanceView`). */
/** Events kept per instance (the oldest go first). */
const MAX_EVENTS = 50;

export class InstanceRecord extends Lifecycle {
  timer: NodeJS.Timeout | undefined;
  /** What happened to it that no call answered for (`RuntimeContext.event`), oldest first. */
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
function withTimeLeft(row: Instance): Instance {
  if (!['deploying', 'running', 'paused'].includes(row.status)) {
    const { expires_at: _stale, ...ended } = row;
    return ended;
  }
  if (!row.expires_at) return row;
  const left = Math.max(0, Math.round((Date.parse(row.expires_at) - Date.now()) / 1000));
  return { ...row, time_left_seconds: left };
}

/** A record as handlers, routes and the server see it: nothing of it can be changed there. */
export type InstanceView = Readonly<InstanceRecord>;

export class Registry {
  readonly #instances = new Map<string, InstanceRecord>();
  /** Ends of listed instances lately: the cap's Retry-After (`#atCapacity`). */
  readonly #ends = new RecentEnds();
  readonly #opts: RegistryOptions;
  readonly #store: InstanceStore;
  /** The store's writes, one after another so that a row's last write is its last state. */
  #writes: Promise<void> = Promise.resolve();
  #closed = false;

  readonly #pool: WarmPool<InstanceRecord>;
  readonly #stock: SandboxStock;
  /** Hand-offs to a person (handoffs.ts); one that ends counts as activity of its instance. */
  readonly handoffs = new Handoffs((h) => this.touch(h.instanceId));

  constructor(opts: RegistryOptions) {
    this.#opts = opts;
    this.#store = opts.store ?? new MemoryInstanceStore();
    this.#pool = new WarmPool({
      sizes: opts.warmPool ?? {},
      log: opts.log,
      room: () => opts.maxInstances - this.#liveCount(),
      fill: (type) => this.#fillOne(type),
      evict: (rec) => {
        this.#move(rec, 'terminated', 'stopped');
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
  }

  /** Instances waiting in the warm pool, by type (they are not listed). */
  get pooled(): Record<RunnableInstanceType, number> {
    return this.#pool.counts();
  }

  /** Live instances, the ones the cap counts (the warm pool's are not). */
  get liveCount(): number {
    return this.#liveCount();
  }

  /** Ids of the instances waiting in the warm pool (diagnostics and tests; never listed). */
  pooledIds(): string[] {
    return this.#pool.list().map((r) => r.id);
  }

  /** Start one instance of `type` for the pool; it stays unlisted until claimed. */
  async #fillOne(type: InstanceType): Promise<InstanceRecord> {
    const factory = this.#opts.factories[type];
    if (!factory || this.#closed || this.#opts.sandboxHost.refusal) {
      throw new Error(`${type} instances cannot be started here`);
    }
    const rec = this.#create(type, DEFAULT_RESOLUTION, 'warm_pool');
    try {
      await this.#boot(rec, factory, [], true);
    } catch (err) {
      this.#move(rec, 'error');
      await this.#teardown(rec);
      throw err;
    }
    if (rec.status !== 'warm_pool') {
      await this.#teardown(rec); // failed while starting
      throw new Error(`a pooled ${type} instance died while starting`);
    }
    this.#opts.changed?.(); // the pool takes it right after
    return rec;
  }

  list(): InstanceView[] {
    return [...this.#instances.values()];
  }

  /**
   * The listing as the store has it (`GET /v1/instances`): every row, after the writes queued
   * before this call, so a client reads what it was just told.
   */
  async rows(): Promise<Instance[]> {
    await this.#writes;
    return (await this.#store.list()).map((row) => withTimeLeft({ ...row }));
  }

  /** Row `id` as the store has it (`GET /v1/instance/{id}`), or 404. */
  async row(id: string): Promise<Instance> {
    await this.#writes;
    const row = await this.#store.get(id);
    if (!row) throw serverError('instance_not_found', { id });
    return withTimeLeft({ ...row });
  }

  /** `rec` as the API answers it: its row, with the seconds left while it is live. */
  view(rec: InstanceView): Instance {
    return withTimeLeft(rec.toJSON());
  }

  /** The record, or 404. */
  get(id: string): InstanceView {
    return this.#get(id);
  }

  #get(id: string): InstanceRecord {
    const rec = this.#instances.get(id);
    if (!rec) throw serverError('instance_not_found', { id });
    return rec;
  }

  /** The record and its runtime when the instance is running, or the 404/400 that says why not. */
  running(id: string): InstanceView & { readonly runtime: InstanceRuntime } {
    const rec = this.#get(id);
    if (rec.status !== 'running' || !rec.runtime) {
      const state = rec.status === 'deploying' ? 'still deploying' : rec.status;
      throw serverError('instance_not_running', { id, state });
    }
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
   * Starts an instance. `extra.extensions` are the browser extensions it loads (resolved by the
   * caller); an instance with extensions or a profile is always started fresh, never taken from the warm pool
   * (its Chromium reads them at launch).
   */
  async start(options: StartRequest, extra: StartExtras = {}): Promise<InstanceView> {
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
    await this.#opts.admission?.();
    const live = this.#liveCount();
    if (live >= this.#opts.maxInstances) throw this.#atCapacity(live);
    const upstream = await this.#upstream(options);
    const extensions = extra.extensions ?? [];
    const pooled =
      extensions.length === 0 && !extra.profile && !identityOf(options)
        ? this.#pool.take(type, options.resolution ?? DEFAULT_RESOLUTION)
        : undefined;
    if (pooled) {
      const rec = await this.#claim(pooled, options, upstream);
      this.#pool.refill();
      if (rec) return rec;
      // it could not take these options: start a fresh one instead (the room is still ours)
    }
    // a cold start must not push the machine past the cap: a pooled instance gives way
    this.#pool.makeRoom();
    try {
      return await this.#startCold(type, factory, options, upstream, extra);
    } finally {
      // not while the start runs, nor while its client connects: it would take their CPU
      this.#stock.refillAfterStart();
    }
  }

  /** A fresh instance for `start`, in a sandbox from the stock where one is ready. */
  async #startCold(
    type: InstanceType,
    factory: RuntimeFactory,
    options: StartRequest,
    upstream: UpstreamProxy | undefined,
    extra: StartExtras,
  ): Promise<InstanceRecord> {
    for (let attempt = 1; ; attempt++) {
      const made = this.#stock.take();
      const rec = this.#create(type, options.resolution ?? DEFAULT_RESOLUTION, 'deploying', made);
      if (upstream) rec.proxyServer = upstreamLabel(upstream);
      extra.onCreate?.(rec.id);
      this.#admit(rec, options);
      try {
        const identity = identityOf(options);
        await this.#boot(
          rec,
          factory,
          options.blocked_domains ?? [],
          false,
          upstream,
          { ...extra, ...(identity && { identity }) },
          made,
        );
      } catch (err) {
        this.#move(rec, 'error', 'crashed');
        await made?.stop(); // also where the runtime never took it
        await this.#teardown(rec);
        const reason = (err as Error).message;
        if (attempt < START_ATTEMPTS && !this.#closed) {
          // nobody has its id yet: it leaves the listing, and a fresh instance is started
          this.#opts.log.warn({ instance: rec.id, reason }, 'instance failed to start; retrying');
          this.#unlist(rec);
          continue;
        }
        this.#opts.log.error({ err, instance: rec.id }, 'instance failed to start');
        throw serverError('instance_failed_to_start', { id: rec.id, reason });
      }
      // stopped or failed while deploying: that move won, and this one is refused
      if (!this.#move(rec, 'running')) await this.#teardown(rec);
      rec.lastActivity = Date.now(); // the idle clock counts from when it is ready
      this.#pool.refill();
      return rec;
    }
  }

  /**
   * The start's upstream proxy, checked before anything of the instance exists (the 400s
   * `proxy_*` naming what is wrong); `undefined` without one. Its credentials stay in this value,
   * which only the instance's egress holds.
   */
  async #upstream(options: StartRequest): Promise<UpstreamProxy | undefined> {
    if (options.proxy === undefined) return undefined;
    if (!this.#opts.sandboxHost.isolated) throw serverError('proxy_unsupported');
    const upstream = upstreamFromSettings(options.proxy);
    if ('error' in upstream) {
      throw serverError('bad_request', { detail: `proxy server ${upstream.error}` });
    }
    const failure = await probeUpstream(this.#opts.sandboxHost, upstream);
    if (failure) throw serverError(failure.code, { reason: failure.message });
    return upstream;
  }

  /**
   * A new instance id (its sandbox may be made ahead with it: sandbox/stock.ts; the sandbox a
   * profile template is made in is named by one too, so that the sweeps know it).
   */
  mintId(): string {
    return this.#opts.newId?.() ?? `inst_${randomBytes(8).toString('hex')}`;
  }

  /**
   * A new record with a fresh token and directory, not yet listed; its id is a new one, or that
   * of the sandbox made ahead for it.
   */
  #create(
    type: InstanceType,
    resolution: Resolution,
    status: InstanceStatus = 'deploying',
    made?: Sandbox,
  ): InstanceRecord {
    const id = made?.name ?? this.mintId();
    return new InstanceRecord(
      id,
      type,
      new Date(),
      resolution,
      randomBytes(24).toString('base64url'),
      join(this.#opts.instancesDir, id),
      status,
    );
  }

  /** List `rec`, start its expiry (and idle) clock and write its row to the store. */
  #admit(rec: InstanceRecord, options: StartRequest): void {
    this.#instances.set(rec.id, rec);
    this.#arm(rec, options.timeout_hours ?? DEFAULT_TIMEOUT_HOURS);
    if (options.idle_timeout_seconds !== undefined) {
      rec.idleMs = options.idle_timeout_seconds * 1000;
      rec.lastActivity = Date.now();
      this.#armIdle(rec, rec.idleMs);
    }
    this.#save(rec);
    this.#opts.changed?.();
  }

  /** Create the runtime of `rec` and start it; `pooled` starts it for the warm pool. */
  async #boot(
    rec: InstanceRecord,
    factory: RuntimeFactory,
    blockedDomains: readonly string[],
    pooled: boolean,
    upstream?: UpstreamProxy,
    extra: StartExtras = {},
    made?: Sandbox,
  ): Promise<void> {
    const extensions = extra.extensions ?? [];
    const identity = extra.identity;
    const ctx: RuntimeContext = {
      id: rec.id,
      type: rec.type,
      resolution: rec.resolution,
      blockedDomains,
      dir: rec.dir,
      token: rec.token,
      publicUrl: this.#opts.publicUrl(),
      log: this.#opts.log,
      chromiumPath: this.#opts.chromiumPath,
      programs: this.#opts.programs,
      maxUploadBytes: this.#opts.maxUploadBytes,
      failed: (reason) => this.#failed(rec, reason),
      event: (type, message) => this.#event(rec, type, message),
      sandboxHost: this.#opts.sandboxHost,
      pooled,
      ...(upstream && { upstream }),
      ...(extensions.length > 0 && { extensions }),
      ...(extra.profile && { profile: extra.profile }),
      ...(identity && { identity }),
      ...(made && { sandbox: made }),
    };
    // synchronous: microseconds, where the promise waits behind whatever holds libuv's thread
    // pool (another instance's teardown removing its directory: 2–19 ms seen)
    mkdirSync(rec.dir, { recursive: true, mode: 0o700 });
    rec.runtime = await factory(ctx);
    await rec.runtime.start();
  }

  /**
   * Hand the pooled `rec` to the caller with `options` applied; undefined when its runtime cannot
   * take them (it is then torn down). Nobody has held its id or token before this moment.
   */
  async #claim(
    rec: InstanceRecord,
    options: StartRequest,
    upstream: UpstreamProxy | undefined,
  ): Promise<InstanceRecord | undefined> {
    if (!this.#move(rec, 'deploying')) {
      void this.#teardown(rec); // it failed in the pool since it was taken
      return undefined;
    }
    rec.launchTime = new Date();
    rec.resolution = options.resolution ?? rec.resolution;
    if (upstream) rec.proxyServer = upstreamLabel(upstream);
    this.#admit(rec, options);
    let ok = false;
    try {
      ok =
        (await rec.runtime?.claim?.({
          resolution: rec.resolution,
          blockedDomains: options.blocked_domains ?? [],
          upstream,
        })) ?? false;
    } catch (err) {
      this.#opts.log.warn({ err, instance: rec.id }, 'a pooled instance could not be claimed');
    }
    if (ok && this.#move(rec, 'running')) {
      rec.lastActivity = Date.now();
      return rec;
    }
    // never shown to anyone: it leaves no trace in the listing or the store
    this.#unlist(rec);
    this.#move(rec, 'terminated', 'stopped');
    void this.#teardown(rec);
    return undefined;
  }

  /**
   * The 429 of this node at its cap, its Retry-After computed as a full cluster's is (the sooner
   * of its instances' deadlines and its recent end rate: retry-after.ts).
   */
  #atCapacity(live: number): HttpError {
    const limit = this.#opts.maxInstances;
    const deadlines: number[] = [];
    for (const r of this.#instances.values()) {
      if (r.live && r.expiresAt) deadlines.push(r.expiresAt.getTime());
    }
    const seconds = retryAfterSeconds(nodeLoad(live, limit, deadlines, this.#ends));
    const err = serverError('server_at_capacity', { live, limit, seconds });
    return new HttpError(err.code, err.detail, err.status, { 'Retry-After': String(seconds) });
  }

  /** Instances counted against the cap: every live one a caller started (not the pool). */
  #liveCount(): number {
    let n = 0;
    for (const r of this.#instances.values()) if (r.live) n++;
    return n;
  }

  /**
   * Stop an instance. It is unusable when this returns (status `terminated`, its token refused,
   * its CDP and live-view connections closed); its processes and disk go in the background, and
   * `close()` waits for them.
   */
  async stop(id: string, reason: EndReason = 'stopped'): Promise<InstanceView> {
    const rec = this.#get(id);
    if (!this.#move(rec, 'terminated', reason)) return rec; // already terminated
    try {
      rec.runtime?.revoke?.();
    } catch (err) {
      this.#opts.log.warn({ err, instance: id }, 'closing client connections failed');
    }
    void this.#teardown(rec);
    return rec;
  }

  async pause(id: string): Promise<InstanceView> {
    const rec = this.#get(id);
    if (rec.status === 'paused') return rec;
    const { runtime } = this.running(id);
    await runtime.pause();
    this.#move(rec, 'paused'); // refused when it was stopped or failed meanwhile: that stands
    return rec;
  }

  async resume(id: string, timeoutHours: number): Promise<InstanceView> {
    const rec = this.#get(id);
    if (rec.status === 'paused' && rec.runtime) {
      await rec.runtime.resume();
      this.#move(rec, 'running');
    } else if (rec.status !== 'running') {
      throw serverError('instance_not_paused', { id, status: rec.status });
    }
    this.#arm(rec, timeoutHours);
    this.#save(rec);
    return rec;
  }

  /**
   * Set the deadline of a live instance to `hours` from now (as a resume does; it replaces what
   * was left rather than adding to it, so it can also shorten it). 410 once it has ended.
   */
  extend(id: string, hours: number): InstanceView {
    const rec = this.#get(id);
    if (!rec.live) throw serverError('instance_gone', { id, state: rec.status });
    this.#arm(rec, hours);
    this.#save(rec);
    return rec;
  }

  /** An API call for instance `id` (unknown ids are ignored): its idle clock starts again. */
  touch(id: string): void {
    const rec = this.#instances.get(id);
    if (rec) rec.lastActivity = Date.now();
  }

  /**
   * A CDP or live-view client of `id` connected: the instance is not idle while it stays.
   * Returns what to call once it has gone.
   */
  connected(id: string): () => void {
    const rec = this.#instances.get(id);
    if (!rec) return () => {};
    rec.clients++;
    let gone = false;
    return () => {
      if (gone) return;
      gone = true;
      rec.clients--;
      rec.lastActivity = Date.now();
    };
  }

  /**
   * Instances of earlier server runs that ended without stopping them (it was killed), as the
   * store has them (`InstanceStore.adopt`): listed as terminated, with the reason they ended,
   * `server_restart` unless the store says. Call once, before the first start.
   */
  async adopt(): Promise<void> {
    for (const row of await this.#store.adopt()) {
      if (this.#instances.has(row.id)) continue;
      const rec = new InstanceRecord(
        row.id,
        row.instance_type,
        new Date(row.launch_time),
        [row.resolution[0], row.resolution[1]],
        '',
        '',
        'terminated',
        row.end_reason ?? 'server_restart',
      );
      if (row.limits) rec.limits = row.limits;
      this.#instances.set(row.id, rec);
    }
  }

  /** `transition`, and the row it leaves written to the store when `rec` is listed. */
  #move(rec: InstanceRecord, to: InstanceStatus, reason?: EndReason): boolean {
    if (!transition(rec, to, reason)) return false;
    if (this.#instances.get(rec.id) === rec) this.#save(rec);
    this.#opts.changed?.();
    return true;
  }

  /** Keep an event of `rec` (the newest 50) and write its row. */
  #event(rec: InstanceRecord, type: string, message: string): void {
    rec.events.push({ at: new Date().toISOString(), type, message });
    if (rec.events.length > MAX_EVENTS) rec.events.splice(0, rec.events.length - MAX_EVENTS);
    if (this.#instances.get(rec.id) === rec) this.#save(rec);
  }

  /** Write the row of the listed `rec` as it is now (after the writes queued before). */
  #save(rec: InstanceRecord): void {
    const row = rec.row();
    this.#write(() => this.#store.put(row));
  }

  /** Take `rec`, which nobody was given, out of the listing and the store. */
  #unlist(rec: InstanceRecord): void {
    this.#instances.delete(rec.id);
    this.#write(() => this.#store.delete(rec.id));
  }

  /**
   * Resolves once the rows queued so far are in the store, or after `FLUSH_WAIT_MS` when the
   * store does not answer (its database away; the write goes on). The API's answer to a start or
   * a stop waits for it, so that a client who then lists through another node of a cluster sees
   * what it was just told.
   */
  async flushed(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.#writes,
      new Promise((resolve) => (timer = setTimeout(resolve, FLUSH_WAIT_MS))),
    ]);
    clearTimeout(timer);
  }

  #write(op: () => Promise<unknown>): void {
    this.#writes = this.#writes.then(op).then(
      () => undefined,
      (err: unknown) => this.#opts.log.warn({ err }, 'could not write the instance store'),
    );
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
    await this.#writes;
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
      const busy =
        rec.clients > 0 || rec.status !== 'running' || this.handoffs.pending(rec.id).length > 0;
      if (busy) rec.lastActivity = now;
      const left = rec.lastActivity + idleMs - now;
      if (left > 0) return this.#armIdle(rec, left);
      this.#opts.log.info({ instance: rec.id, idle_seconds: idleMs / 1000 }, 'instance idle');
      this.stop(rec.id, 'idle').catch((err: unknown) =>
        this.#opts.log.error({ err, instance: rec.id }, 'idle stop failed'),
      );
    }, ms);
    rec.idleTimer.unref();
  }

  #arm(rec: InstanceRecord, hours: number): void {
    clearTimeout(rec.timer);
    const ms = hours * HOUR_MS;
    rec.expiresAt = new Date(Date.now() + ms);
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
    const pooled = rec.status === 'warm_pool';
    if (!this.#move(rec, 'error', 'crashed')) return; // it had ended already
    this.#opts.log.warn(
      { instance: rec.id, reason },
      `${pooled ? 'a pooled ' : ''}instance failed`,
    );
    if (pooled) this.#pool.drop(rec);
    void this.#teardown(rec);
  }

  /** Kill processes, then remove the directory. Memoised: concurrent callers share one promise. */
  #teardown(rec: InstanceRecord): Promise<void> {
    clearTimeout(rec.timer);
    clearTimeout(rec.idleTimer);
    this.handoffs.cancelAll(rec.id);
    rec.stopping ??= (async () => {
      // a pooled instance that was never claimed was never in the store
      const listed = this.#instances.get(rec.id) === rec;
      if (listed) {
        this.#ends.record(); // the rate half of the cap's Retry-After
        const reason = rec.endReason ?? 'stopped';
        this.#write(() => this.#store.ended(rec.id, reason));
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
