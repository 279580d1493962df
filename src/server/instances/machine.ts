/**
 * The part every instance type shares: a sandbox, its egress opened beside the type's own start,
 * the artifacts attached to the fresh disk, a warm-pool claim, pause and resume, and one stop that
 * tears the layers down in the reverse order and runs once however often it is asked for.
 *
 * A type (browser/, ubuntu/) extends `InstanceMachine` and writes only what differs: what its
 * start launches (`boot`), what its claim must check or change (`adopt`), and how its own
 * processes end (`halt`). The registry sees an `InstanceRuntime` like any other.
 */
import { dirname } from 'node:path';
import type { InstanceArtifacts } from '../artifacts/store.js';
import { openEgress, Sandbox, type InstanceEgress, type SandboxLimits } from '../sandbox/index.js';
import { serverError } from '../errors.js';
import { stage, StageTrace, traceStages } from '../../internal/stages.js';
import {
  claimedContext,
  runtimeContext,
  type ClaimRequest,
  type InstanceRuntime,
  type RuntimeContext,
} from './runtime.js';

/**
 * The root of an isolated instance's disk on the host: root-owned, never shown inside (the
 * instance sees only its home, /tmp and /dev/shm on it), and within the disk quota. Where
 * uploads wait for their path (`FilesCapability.spoolDir`).
 */
export function uploadSpoolDir(sandbox: Sandbox | undefined): string | undefined {
  return sandbox?.mode === 'isolated' && sandbox.limits.disk_bytes !== null
    ? dirname(sandbox.hostHome)
    : undefined;
}

export abstract class InstanceMachine implements InstanceRuntime {
  #ctx: RuntimeContext;
  #sandbox: Sandbox | undefined;
  #egress: InstanceEgress | undefined;
  #stopping: Promise<void> | undefined;

  constructor(ctx: RuntimeContext) {
    this.#ctx = runtimeContext(ctx);
  }

  /**
   * The instance's context, read-only; a claim from the warm pool replaces it with one carrying
   * the user's plan (resolution, blocked domains, upstream), so every part that reads it at use
   * sees the user's values from then on.
   */
  get ctx(): RuntimeContext {
    return this.#ctx;
  }

  /**
   * Directories made on the instance's still empty disk before any process runs (isolated mode
   * only: `Sandbox.seedHome`), relative to its home.
   */
  protected seedDirs(): string[] {
    return [];
  }

  /**
   * The type's own start, run beside the egress's: the egress socket exists before either begins,
   * so nothing the type starts waits on it. Throwing fails the start; `halt` then runs.
   */
  protected abstract boot(sandbox: Sandbox): Promise<void>;

  /**
   * What a claim from the warm pool needs of this type: false when it cannot honour `req` (the
   * registry then starts a fresh instance); else apply the type's part of it (`this.ctx` is still
   * the pooled one here). The machine then applies the blocked domains and the upstream, puts the
   * user's plan in the context and the normal CPU weight.
   */
  protected abstract adopt(req: ClaimRequest): Promise<boolean>;

  /**
   * End the type's own processes, started or not (it runs after a failed start too), before the
   * egress closes and the sandbox kills what is left.
   */
  protected abstract halt(): Promise<void>;

  /** Before the sandbox freezes (e.g. tell a viewer), and after it thaws. */
  protected async beforePause(): Promise<void> {}
  protected async afterResume(): Promise<void> {}

  /**
   * Start the instance. Where the time goes, stage by stage, is logged at debug level
   * (src/internal/stages.ts).
   */
  async start(): Promise<void> {
    const trace = new StageTrace();
    try {
      await traceStages(trace, () => this.#start());
    } finally {
      const { instance, plan, services } = this.ctx;
      const { id, type } = instance;
      services.log.debug(
        { instance: id, type, pooled: plan.pooled, stages: trace.stages },
        `start of ${type} ${id}: ${trace.elapsed().toFixed(0)} ms: ${trace.summary()}`,
      );
    }
  }

  async #start(): Promise<void> {
    const { instance, plan, services } = this.ctx;
    const onCrash = (reason: string) => services.failed(reason);
    const background = plan.pooled;
    const made = plan.sandbox;
    const sandbox = await stage('sandbox', async () => {
      if (!made) {
        return Sandbox.create(services.sandboxHost, {
          dir: instance.dir,
          name: instance.id,
          log: services.log,
          onCrash,
          background,
        });
      }
      await made.handOver({ onCrash, background });
      return made;
    });
    this.#sandbox = sandbox;
    try {
      const seed = this.seedDirs();
      if (sandbox.mode === 'isolated' && seed.length > 0)
        await stage('seed', () => sandbox.seedHome(seed));
      await stage('artifacts', () =>
        this.artifacts?.attach({
          host: sandbox.hostHome,
          inside: sandbox.home,
          budget: sandbox.limits.disk_bytes,
        }),
      );
      // kept as soon as it is open, so that the stop after a failed boot closes it
      const egress =
        sandbox.mode === 'isolated'
          ? stage('egress', () =>
              openEgress(
                sandbox,
                services.sandboxHost,
                plan.blockedDomains,
                services.log,
                plan.upstream,
                services.event && ((type, message) => services.event?.(type, message)),
              ),
            ).then((opened) => {
              this.#egress = opened;
            })
          : undefined;
      const results = await Promise.allSettled([egress, stage('boot', () => this.boot(sandbox))]);
      for (const r of results) if (r.status === 'rejected') throw r.reason;
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /**
   * A warm-pool instance gets its user. Only an isolated instance can take one (its egress is
   * where the user's blocked domains are enforced); the type decides the rest.
   */
  async claim(req: ClaimRequest): Promise<boolean> {
    const sandbox = this.#sandbox;
    const egress = this.#egress;
    if (!sandbox || sandbox.mode !== 'isolated' || !egress || this.#stopping) return false;
    if (!(await this.adopt(req))) return false;
    egress.setBlockedDomains(req.blockedDomains);
    egress.setUpstream(req.upstream);
    this.#ctx = claimedContext(this.#ctx, req);
    await sandbox.foreground();
    return true;
  }

  /**
   * Reverse order of the start: thaw (a frozen process cannot act on being stopped), finish a
   * running recording and copy the artifacts out while the disk is there, the type's processes,
   * the egress, then the sandbox with whatever is still inside. Runs once.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      const sandbox = this.#sandbox;
      if (!sandbox) return;
      await sandbox.resume().catch(() => {});
      await this.artifacts?.finish();
      await this.halt();
      this.#egress?.close();
      await sandbox.stop();
    })();
    return this.#stopping;
  }

  async pause(): Promise<void> {
    const sandbox = this.live();
    const refusal = sandbox.pauseRefusal;
    if (refusal) throw serverError('isolation_unavailable', { reason: refusal });
    await this.beforePause();
    await sandbox.pause();
  }

  async resume(): Promise<void> {
    const sandbox = this.live();
    await sandbox.resume();
    await this.afterResume();
  }

  /** Downloads and recordings, kept past the stop (artifacts/store.ts). */
  get artifacts(): InstanceArtifacts | undefined {
    return this.ctx.services.artifacts;
  }

  /** Limits that apply (GET /v1/instance/{id}), once the sandbox exists. */
  get limits(): SandboxLimits | undefined {
    return this.#sandbox?.limits;
  }

  /** True from the first `stop()` on. */
  protected get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /** The sandbox of a live instance; the 409s for one that is not started yet or stopping. */
  protected live(): Sandbox {
    if (this.#stopping) throw serverError('instance_stopping');
    if (!this.#sandbox) throw serverError('instance_not_ready');
    return this.#sandbox;
  }

  /** The instance's egress proxy, once open (isolated instances only). */
  protected get egress(): InstanceEgress | undefined {
    return this.#egress;
  }

  /** The sandbox once created, whatever the instance's state (for the start's own steps). */
  protected get created(): Sandbox | undefined {
    return this.#sandbox;
  }
}
