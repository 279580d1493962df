/**
 * Draining a node: SIGTERM on a cluster node, or `POST /v1/node/drain` (`burrow drain`).
 *
 * From the first moment the node takes no new instances (starts and warm-pool claims through it
 * answer 503 `node_draining` with `Retry-After`; its row says `draining`, so placement leaves it
 * out) and its readiness is false, so a Service stops sending it clients. What runs goes on: open
 * `cdp_url` and live-view sockets keep working until their instances end, or until the drain
 * deadline, when the instances still live are stopped with `end_reason: "node_drained"`. Then the
 * server closes, and `drained` resolves (the CLI exits 0 on it).
 */
import { until } from '../../internal/deadline.js';
import type { Health } from '../instances/health.js';
import type { Registry } from '../instances/registry.js';
import type { Logger } from '../instances/runtime.js';

export interface DrainOptions {
  registry: Registry;
  health: Health;
  /** Marks this node draining in its cluster (placement leaves it out); alone, nothing. */
  cluster: { drain(): Promise<void> };
  /** How long live instances may run on after the drain began. */
  deadlineMs: number;
  log: Logger;
  /** Close the server (what `RunningServer.close` does). */
  close: () => Promise<void>;
}

/** How often the drain looks whether every instance has ended. */
const LOOK_MS = 250;

export class Drain {
  readonly #opts: DrainOptions;
  #done: Promise<void> | undefined;
  #deadline: Date | undefined;
  /** Resolves when a drain, begun by anyone, has closed the server (never without a drain). */
  readonly drained: Promise<void>;
  readonly #closed: () => void;

  constructor(opts: DrainOptions) {
    this.#opts = opts;
    let closed!: () => void;
    this.drained = new Promise<void>((resolve) => (closed = resolve));
    this.#closed = closed;
  }

  /** When the remaining instances are stopped, once the drain began. */
  get deadline(): Date | undefined {
    return this.#deadline;
  }

  /** Begin the drain (idempotent); resolves once the server has closed. */
  start(): Promise<void> {
    return (this.#done ??= this.#run());
  }

  /** Resolves when a drain, begun by anyone, has finished. */
  get done(): Promise<void> | undefined {
    return this.#done;
  }

  async #run(): Promise<void> {
    const { registry, health, cluster, log } = this.#opts;
    health.drain();
    this.#deadline = new Date(Date.now() + this.#opts.deadlineMs);
    const live = () => registry.list().filter((r) => r.live);
    log.info(
      { instances: live().length, deadline: this.#deadline.toISOString() },
      'draining: no new instances; the running ones go on until they end or the deadline',
    );
    // nobody may claim a pooled instance here any more: the pool's room goes back to the machine
    await registry.closePool();
    await cluster.drain().catch((err: unknown) => {
      // the database may be away: the node still refuses starts itself
      log.warn({ err }, 'could not mark this node draining in the cluster');
    });
    await until(() => live().length === 0, {
      timeoutMs: this.#deadline.getTime() - Date.now(),
      intervalMs: LOOK_MS,
    });
    const left = live();
    if (left.length > 0) {
      log.info({ instances: left.length }, 'drain deadline: stopping the instances still running');
    }
    for (const rec of left) {
      await registry.stop(rec.id, 'node_drained').catch((err: unknown) => {
        log.warn({ err, instance: rec.id }, 'could not stop an instance at the drain deadline');
      });
    }
    await this.#opts.close();
    this.#closed();
  }
}
