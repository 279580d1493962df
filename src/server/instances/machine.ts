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
import type { ClaimRequest, InstanceRuntime, RuntimeContext } from './runtime.js';

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

/**
 * The context as the machine keeps it: a claim from the warm pool replaces the blocked domains
 * (and, where the type allows it, the resolution) in place, so every part reading it sees the
 * user's values from then on.
 */
export interface MachineContext extends RuntimeContext {
  blockedDomains: readonly string[];
  /** `[width, height]`; shared by reference with whatever draws at this size. */
  readonly resolution: [number, number];
}

export abstract class InstanceMachine implements InstanceRuntime {
  readonly ctx: MachineContext;
  #sandbox: Sandbox | undefined;
  #egress: InstanceEgress | undefined;
  #stopping: Promise<void> | undefined;

  constructor(ctx: RuntimeContext) {
    this.ctx = {
      ...ctx,
      resolution: [ctx.resolution[0], ctx.resolution[1]],
      blockedDomains: [...ctx.blockedDomains],
    };
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
   * registry then starts a fresh instance); else apply the type's part of it. The machine
   * applies the blocked domains and the normal CPU weight after it.
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
      const { ctx } = this;
      ctx.log.debug(
        { instance: ctx.id, type: ctx.type, pooled: ctx.pooled ?? false, stages: trace.stages },
        `start of ${ctx.type} ${ctx.id}: ${trace.elapsed().toFixed(0)} ms: ${trace.summary()}`,
      );
    }
  }

  async #start(): Promise<void> {
    const { ctx } = this;
    const onCrash = (reason: string) => ctx.failed(reason);
    const background = ctx.pooled ?? false;
    const made = ctx.sandbox;
    const sandbox = await stage('sandbox', async () => {
      if (!made) {
        return Sandbox.create(ctx.sandboxHost, {
          dir: ctx.dir,
          name: ctx.id,
          log: ctx.log,
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
                ctx.sandboxHost,
                ctx.blockedDomains,
                ctx.log,
                ctx.upstream,
                ctx.event && ((type, message) => ctx.event?.(type, message)),
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
    this.ctx.blockedDomains = [...req.blockedDomains];
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
    return this.ctx.artifacts;
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
