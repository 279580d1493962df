/**
 * How an instance comes to be: a cold start (in a sandbox from the stock where one is ready,
 * tried twice), a pooled one started ahead of demand, and a pooled one handed to its user (a
 * claim). Each makes the record (id, token, directory), lists it with its clocks running, and
 * builds the runtime's read-only context from the start's plan (plan.ts, runtime.ts). Whether a
 * start may go ahead at all, and whether a pooled instance serves it, the registry decides.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { InstanceStatus, InstanceType } from '../../api/index.js';
import { boundedLogger } from '../../internal/log-budget.js';
import { HttpError, serverError } from '../errors.js';
import {
  upstreamLabel,
  type Sandbox,
  type SandboxStock,
  type UpstreamProxy,
} from '../sandbox/index.js';
import type { InstanceClocks } from './clocks.js';
import type { Listing } from './listing.js';
import { DEFAULT_RESOLUTION, type StartPlan } from './plan.js';
import type { WarmPool } from './pool.js';
import { InstanceRecord } from './record.js';
import type { RegistryOptions } from './options.js';
import {
  runtimeContext,
  type InstancePlan,
  type RuntimeFactory,
  type StartResources,
} from './runtime.js';

/**
 * How many times a cold start is tried. A machine that fails to boot is replaced once by a fresh
 * one: nobody holds the failed instance's id yet; a second failure is answered with its reason.
 * (The failure this was added for, processes SIGKILLed as they started, was bubblewrap's
 * `--die-with-parent` racing its own intermediate process; see sandbox/sandbox.ts. The retry
 * stays for starts that fail for a passing reason.)
 */
const START_ATTEMPTS = 2;

export interface StartsOptions {
  registry: RegistryOptions;
  listing: Listing;
  clocks: InstanceClocks;
  pool: WarmPool<InstanceRecord>;
  stock: SandboxStock;
  /** The registry is closing: no retry, no pooled instance. */
  closed: () => boolean;
  /** The registry's teardown of `rec` (memoised). */
  teardown: (rec: InstanceRecord) => Promise<void>;
  /** A process of `rec` died on its own (`InstanceServices.failed`). */
  failed: (rec: InstanceRecord, reason: string) => void;
}

export class InstanceStarts {
  readonly #opts: StartsOptions;

  constructor(opts: StartsOptions) {
    this.#opts = opts;
  }

  /** A fresh instance for `start`, in a sandbox from the stock where one is ready. */
  async cold(
    factory: RuntimeFactory,
    plan: StartPlan,
    upstream: UpstreamProxy | undefined,
    resources: StartResources,
  ): Promise<InstanceRecord> {
    for (let attempt = 1; ; attempt++) {
      const made = this.#opts.stock.take();
      const rec = this.#create(plan.type, plan.resolution, 'deploying', made);
      if (upstream) rec.proxyServer = upstreamLabel(upstream);
      resources.onCreate?.(rec.id);
      this.#admit(rec, plan);
      try {
        await this.#boot(rec, factory, {
          pooled: false,
          blockedDomains: plan.blockedDomains,
          upstream,
          identity: plan.identity,
          extensions: resources.extensions ?? [],
          profile: resources.profile,
          sandbox: made,
        });
      } catch (err) {
        this.#opts.listing.move(rec, 'error', 'crashed');
        await made?.stop(); // also where the runtime never took it
        await this.#opts.teardown(rec);
        // the request's own fault (an extension that cannot be copied): the same again would fail
        if (err instanceof HttpError && err.status < 500) {
          this.#opts.listing.remove(rec); // nobody has its id: it leaves the listing
          throw err;
        }
        const reason = withoutHostPaths(err);
        if (attempt < START_ATTEMPTS && !this.#opts.closed()) {
          // nobody has its id yet: it leaves the listing, and a fresh instance is started
          this.#opts.registry.log.warn(
            { instance: rec.id, reason },
            'instance failed to start; retrying',
          );
          this.#opts.listing.remove(rec);
          continue;
        }
        this.#opts.registry.log.error({ err, instance: rec.id }, 'instance failed to start');
        throw serverError('instance_failed_to_start', { id: rec.id, reason });
      }
      // stopped or failed while deploying: that move won, and this one is refused
      if (!this.#opts.listing.move(rec, 'running')) await this.#opts.teardown(rec);
      this.#opts.clocks.touch(rec); // the idle clock counts from when it is ready
      this.#opts.pool.refill();
      return rec;
    }
  }

  /** Start one instance of `type` for the pool; it stays unlisted until claimed. */
  async fill(type: InstanceType): Promise<InstanceRecord> {
    const factory = this.#opts.registry.factories[type];
    if (!factory || this.#opts.closed() || this.#opts.registry.sandboxHost.refusal) {
      throw new Error(`${type} instances cannot be started here`);
    }
    const rec = this.#create(type, DEFAULT_RESOLUTION, 'warm_pool');
    try {
      await this.#boot(rec, factory, { pooled: true, blockedDomains: [], extensions: [] });
    } catch (err) {
      this.#opts.listing.move(rec, 'error');
      await this.#opts.teardown(rec);
      throw err;
    }
    if (rec.status !== 'warm_pool') {
      await this.#opts.teardown(rec); // failed while starting
      throw new Error(`a pooled ${type} instance died while starting`);
    }
    this.#opts.registry.changed?.(); // the pool takes it right after
    return rec;
  }

  /**
   * A new instance id (its sandbox may be made ahead with it: sandbox/stock.ts; the sandbox a
   * profile template is made in is named by one too, so that the sweeps know it).
   */
  mintId(): string {
    return this.#opts.registry.newId?.() ?? `inst_${randomBytes(8).toString('hex')}`;
  }

  /**
   * A new record with a fresh token and directory, not yet listed; its id is a new one, or that
   * of the sandbox made ahead for it.
   */
  #create(
    type: InstanceType,
    resolution: readonly [number, number],
    status: InstanceStatus,
    made?: Sandbox,
  ): InstanceRecord {
    const id = made?.name ?? this.mintId();
    return new InstanceRecord(
      id,
      type,
      new Date(),
      [resolution[0], resolution[1]],
      randomBytes(24).toString('base64url'),
      join(this.#opts.registry.instancesDir, id),
      status,
    );
  }

  /** Start the clocks of `rec` as `plan` asks, list it and write its row. */
  #admit(rec: InstanceRecord, plan: StartPlan): void {
    this.#opts.clocks.start(rec, plan.timeoutHours, plan.idleTimeoutSeconds);
    this.#opts.listing.add(rec);
    this.#opts.registry.changed?.();
  }

  /** Create the runtime of `rec` with the context of `plan` and start it. */
  async #boot(
    rec: InstanceRecord,
    factory: RuntimeFactory,
    plan: Omit<InstancePlan, 'resolution'>,
  ): Promise<void> {
    const opts = this.#opts.registry;
    const ctx = runtimeContext({
      instance: { id: rec.id, type: rec.type, dir: rec.dir, token: rec.token },
      plan: { ...plan, resolution: rec.resolution },
      services: {
        publicUrl: opts.publicUrl(),
        // everything the instance (its pages, its cdp_url holders) can make the server log is
        // bounded in lines per minute: the log is the operator's disk (src/internal/log-budget.ts)
        log: boundedLogger(opts.log, { bindings: { instance: rec.id } }),
        chromiumPath: opts.chromiumPath,
        programs: opts.programs,
        maxUploadBytes: opts.maxUploadBytes,
        sandboxHost: opts.sandboxHost,
        failed: (reason) => this.#opts.failed(rec, reason),
        event: (type, message) => this.#opts.listing.event(rec, type, message),
      },
    });
    // synchronous: microseconds, where the promise waits behind whatever holds libuv's thread
    // pool (another instance's teardown removing its directory: 2–19 ms seen)
    mkdirSync(rec.dir, { recursive: true, mode: 0o700 });
    rec.runtime = await factory(ctx);
    await rec.runtime.start();
  }

  /**
   * Hand the pooled `rec` to the caller with `plan` applied; undefined when its runtime cannot
   * take it (it is then torn down). Nobody has held its id or token before this moment.
   */
  async claim(
    rec: InstanceRecord,
    plan: StartPlan,
    upstream: UpstreamProxy | undefined,
  ): Promise<InstanceRecord | undefined> {
    if (!this.#opts.listing.move(rec, 'deploying')) {
      void this.#opts.teardown(rec); // it failed in the pool since it was taken
      return undefined;
    }
    rec.launchTime = new Date();
    rec.resolution = [plan.resolution[0], plan.resolution[1]];
    if (upstream) rec.proxyServer = upstreamLabel(upstream);
    this.#admit(rec, plan);
    let ok = false;
    try {
      ok =
        (await rec.runtime?.claim?.({
          resolution: rec.resolution,
          blockedDomains: plan.blockedDomains,
          upstream,
        })) ?? false;
    } catch (err) {
      this.#opts.registry.log.warn(
        { err, instance: rec.id },
        'a pooled instance could not be claimed',
      );
    }
    if (ok && this.#opts.listing.move(rec, 'running')) {
      this.#opts.clocks.touch(rec);
      return rec;
    }
    // never shown to anyone: it leaves no trace in the listing or the store
    this.#opts.listing.remove(rec);
    this.#opts.listing.move(rec, 'terminated', 'stopped');
    void this.#opts.teardown(rec);
    return undefined;
  }
}

/** `err`'s message without the host paths a file-system error names (`open '/var/…'`). */
function withoutHostPaths(err: unknown): string {
  const e = err as Partial<NodeJS.ErrnoException> & { dest?: unknown };
  let text = err instanceof Error ? err.message : String(err);
  for (const path of [e.path, e.dest]) {
    if (typeof path === 'string' && path !== '') text = text.split(path).join('…');
  }
  return text;
}
