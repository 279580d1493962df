/**
 * The warm pool: instances started ahead of demand, so that `POST /v1/start` hands one over in
 * milliseconds instead of starting a sandbox and a Chromium (or a desktop and a kernel).
 *
 * - A pooled instance has status `warm_pool` and is not listed: `GET /v1/instances` and
 *   `GET /v1/instance/{id}` know it only once claimed, with the id it had all along. Its id and
 *   token were never given to anyone before the claim, so no state can leak between users.
 * - The pool shares the instance cap with everyone: it fills only while live instances plus the
 *   pool stay under `maxInstances`, and a cold start at the cap takes a pooled instance's place.
 * - Filling is one instance at a time, and the registry starts pooled instances at a low CPU
 *   weight (the sandbox's cgroup) until they are claimed, so a refill yields the CPU to the
 *   instance just handed out.
 * - A fill that fails backs off (1 s doubling to a minute), so a machine that cannot start
 *   instances does not spin.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  INSTANCE_TYPES,
  type InstanceType,
  type Resolution,
  type RunnableInstanceType,
} from '../../api/index.js';
import { RetryBackoff } from '../../internal/backoff.js';
import type { Logger } from '../../internal/log.js';
import type { WarmPoolSizes } from '../config.js';

/** Instances kept started per type, ready to be claimed by `start` (config.ts). */
export type { WarmPoolSizes };

/** What the pool needs to know of an instance (the registry's records). */
export interface PooledInstance {
  readonly type: InstanceType;
  readonly resolution: Resolution;
}

export interface WarmPoolOptions<InstanceRecord extends PooledInstance> {
  sizes: WarmPoolSizes;
  log: Logger;
  /** How many more instances the cap allows beside the live ones (the pool counts here). */
  room(): number;
  /** Start one instance of `type` for the pool. */
  fill(type: InstanceType): Promise<InstanceRecord>;
  /** Tear down a pooled instance that is no longer wanted. */
  evict(rec: InstanceRecord): Promise<void>;
}

export class WarmPool<InstanceRecord extends PooledInstance> {
  readonly #opts: WarmPoolOptions<InstanceRecord>;
  readonly #ready = new Map<InstanceType, InstanceRecord[]>();
  /** The fill loop while it runs. */
  #filling: Promise<void> | undefined;
  /** The next fill after one that failed. */
  readonly #retry = new RetryBackoff();
  #closed = false;

  constructor(opts: WarmPoolOptions<InstanceRecord>) {
    this.#opts = opts;
  }

  /** The instances waiting now. */
  list(): InstanceRecord[] {
    return [...this.#ready.values()].flat();
  }

  counts(): Record<RunnableInstanceType, number> {
    return { browser: this.#list('browser').length, ubuntu: this.#list('ubuntu').length };
  }

  get #total(): number {
    let n = 0;
    for (const list of this.#ready.values()) n += list.length;
    return n;
  }

  #list(type: InstanceType): InstanceRecord[] {
    let list = this.#ready.get(type);
    if (!list) this.#ready.set(type, (list = []));
    return list;
  }

  /**
   * A ready instance of `type`, removed from the pool. Types whose screen cannot change after
   * start (`ubuntu`: Xvfb keeps its framebuffer size) are taken only at the size they have.
   */
  take(type: InstanceType, resolution: readonly [number, number]): InstanceRecord | undefined {
    const list = this.#list(type);
    const i =
      type === 'browser'
        ? list.length - 1
        : list.findLastIndex(
            (r) => r.resolution[0] === resolution[0] && r.resolution[1] === resolution[1],
          );
    if (i < 0) return undefined;
    return list.splice(i, 1)[0];
  }

  /** A pooled instance failed on its own: forget it (the registry tears it down). */
  drop(rec: InstanceRecord): void {
    const list = this.#list(rec.type);
    const i = list.indexOf(rec);
    if (i >= 0) list.splice(i, 1);
    this.refill();
  }

  /** Evict pooled instances until one more live instance fits under the cap beside the pool. */
  makeRoom(): void {
    while (this.#total > 0 && this.#opts.room() - this.#total < 1) {
      const victim = this.#victim();
      if (!victim) break;
      void this.#opts.evict(victim);
    }
  }

  #victim(): InstanceRecord | undefined {
    // the type with the most spare instances gives one up
    let best: InstanceRecord[] | undefined;
    for (const list of this.#ready.values()) if (list.length > (best?.length ?? 0)) best = list;
    return best?.shift();
  }

  /** Start filling in the background if the pool is short (no-op while a fill runs). */
  refill(): void {
    if (this.#closed || this.#filling || this.#retry.pending) return;
    if (!this.#next()) return;
    this.#filling = this.#loop().finally(() => {
      this.#filling = undefined;
    });
  }

  /** The type to start next, or undefined when the pool is full or the cap leaves no room. */
  #next(): InstanceType | undefined {
    if (this.#opts.room() - this.#total <= 0) return undefined;
    for (const type of INSTANCE_TYPES) {
      if (this.#list(type).length < (this.#opts.sizes[type] ?? 0)) return type;
    }
    return undefined;
  }

  async #loop(): Promise<void> {
    for (let type = this.#next(); type && !this.#closed; type = this.#next()) {
      let rec: InstanceRecord;
      try {
        rec = await this.#opts.fill(type);
      } catch (err) {
        if (this.#closed) return;
        const retryInMs = this.#retry.schedule(() => this.refill());
        this.#opts.log.warn(
          { err, type, retryInMs },
          'could not start an instance for the warm pool',
        );
        return;
      }
      this.#retry.succeeded();
      // the cap may have filled up while it started, or the server began to close
      if (this.#closed || this.#opts.room() - this.#total <= 0) {
        await this.#opts.evict(rec);
        continue;
      }
      this.#list(type).push(rec);
    }
  }

  /** Stop filling; the pooled instances, for the registry to tear down. */
  close(): InstanceRecord[] {
    this.#closed = true;
    this.#retry.cancel();
    const all = [...this.#ready.values()].flat();
    this.#ready.clear();
    return all;
  }

  /** Resolves once nothing more is to be started (full, or the cap leaves no room). */
  async full(): Promise<void> {
    while (!this.#closed && (this.#filling || this.#retry.pending || this.#next())) {
      this.refill();
      await (this.#filling ?? sleep(100));
    }
  }

  /** Resolves when no fill is in flight. */
  async idle(): Promise<void> {
    await this.#filling;
  }
}
