/**
 * Sandboxes made ahead: a few complete, never used sandboxes (cgroup, disk, the anchor holding
 * the namespaces, the egress's listener in its network), so that a cold start only starts its
 * own processes. Building one costs 20–40 ms of serial work (the anchor's bubblewrap, the user
 * namespace's maps, the disk's mount) and the listener another process start, on the
 * path of every start that the warm pool does not serve: a burst that drained the pool, a start
 * with extensions, a profile or an identity. With the stock, that start takes one in well under a
 * millisecond.
 *
 * - Each is built for the id its instance will have, minted ahead (the registry's `newId`), so
 *   everything that names an instance on the host (its cgroup, pid 1's `burrow-init-<id>`, its
 *   directory, `BURROW_INSTANCE`) names it from the first moment. Nobody has seen the id before
 *   the start that takes it answers.
 * - Nothing of anyone's ever ran in one: the anchor only waits, and `Sandbox.handOver` refuses a
 *   sandbox in which anything was started, or whose anchor died. A sandbox whose anchor dies in
 *   the stock is stopped and replaced.
 * - Refilling is one sandbox at a time, in the background, a moment after the start that took
 *   one has answered (the registry calls `refillAfterStart` then), at a low CPU weight
 *   until handed over. Not at once: the client that started the instance connects and loads its
 *   first page in the next few hundred ms, and the refill's process starts would take CPU from
 *   that instance's Chromium and the server's event loop (measured: connectOverCDP and the first
 *   `goto` took ~15 ms longer with the refill beside them, bench/start-to-page.ts).
 * - Each also holds the process chain of a browser's Chromium, started up to the command itself
 *   (`Sandbox.prepareSpawn`): a browser start then writes Chromium's command line to it instead
 *   of starting six processes in a row.
 * - Each gets what `prepare` writes into it before it is ready: a Chromium profile's skeleton
 *   (chromium/profile-template.ts), which a start would otherwise have Chromium create.
 * - The stock is not counted against the instance cap: it holds no browser, only five idle
 *   processes, an empty cgroup and a disk (sparse until written).
 */
import { mkdir, rm } from 'node:fs/promises';
import { RetryBackoff } from '../../internal/backoff.js';
import type { Logger } from '../../internal/log.js';
import { untraced } from '../../internal/stages.js';
import type { SandboxHost } from './host.js';
import { EGRESS_PORT } from './network.js';
import { BROWSER_STDIO, Sandbox } from './sandbox.js';

export interface SandboxStockOptions {
  host: SandboxHost;
  /** Sandboxes kept ready; 0 disables the stock. */
  size: number;
  /** The name (instance id) of the next sandbox. */
  mint(): string;
  /** The instance directory of `name` (made by the stock, removed with an unused sandbox). */
  dirOf(name: string): string;
  /**
   * What else a sandbox gets before it is ready, nothing having run in it (e.g. a Chromium
   * profile's skeleton, chromium/profile-template.ts). A failure discards the sandbox.
   */
  prepare?: (sandbox: Sandbox) => Promise<void>;
  log: Logger;
}

/** How long after a start the stock refills: after its client's first commands and page. */
const REFILL_DELAY_MS = 1500;

export class SandboxStock {
  readonly #opts: SandboxStockOptions;
  readonly #ready: Sandbox[] = [];
  #filling: Promise<void> | undefined;
  /** A refill asked for later (`refillAfterStart`). */
  #timer: NodeJS.Timeout | undefined;
  /** Sandboxes on their way out (`#discard`). */
  readonly #discarding = new Set<Promise<void>>();
  /** The next fill after one that failed. */
  readonly #retry = new RetryBackoff();
  #closed = false;

  constructor(opts: SandboxStockOptions) {
    this.#opts = opts;
  }

  /** Whether the stock can hold anything here (isolated instances, a size above 0). */
  get enabled(): boolean {
    return this.#opts.size > 0 && this.#opts.host.isolated && !this.#opts.host.refusal;
  }

  /** Sandboxes ready now. */
  get ready(): number {
    return this.#ready.length;
  }

  /** The names of the sandboxes ready now (diagnostics and tests; shown to no client). */
  names(): string[] {
    return this.#ready.map((s) => s.name);
  }

  /**
   * A ready sandbox, out of the stock: its `name` is the id the instance must take, and it is
   * the caller's to `handOver` or `stop`. Undefined when none is ready.
   */
  take(): Sandbox | undefined {
    while (this.#ready.length > 0) {
      const sandbox = this.#ready.shift()!;
      if (sandbox.fresh) return sandbox;
      void this.#discard(sandbox);
    }
    return undefined;
  }

  /**
   * Refill once a start that may have taken one is `REFILL_DELAY_MS` behind (a refill already
   * asked for keeps its time: starts coming one after the other do not put it off).
   */
  refillAfterStart(): void {
    if (!this.#mayFill) return;
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      this.refill();
    }, REFILL_DELAY_MS).unref();
  }

  /** Whether a fill may begin: open, enabled, none running and no retry waiting. */
  get #mayFill(): boolean {
    return !this.#closed && this.enabled && !this.#filling && !this.#retry.pending;
  }

  /** Fill the stock up in the background now, one sandbox at a time. */
  refill(): void {
    if (!this.#mayFill) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    // not part of the start that set it off (src/internal/stages.ts)
    untraced(() => {
      this.#filling = this.#fill().finally(() => (this.#filling = undefined));
    });
  }

  /**
   * Resolves once the stock is full, or its fill has failed or been closed, and the host's
   * stock of disks it takes from is refilled too: no background work of the stocks is left.
   * A refill waiting for its moment starts now (whoever waits for the stock wants it full).
   */
  async filled(): Promise<void> {
    if (this.#timer) this.refill();
    while (this.#filling || this.#discarding.size > 0) {
      await Promise.all([this.#filling, ...this.#discarding]);
    }
    await this.#opts.host.diskStock?.filled();
  }

  async #fill(): Promise<void> {
    const { host, log } = this.#opts;
    while (!this.#closed && this.#ready.length < this.#opts.size) {
      const name = this.#opts.mint();
      const dir = this.#opts.dirOf(name);
      let sandbox: Sandbox | undefined;
      try {
        await mkdir(dir, { recursive: true, mode: 0o700 });
        sandbox = await Sandbox.create(host, {
          dir,
          name,
          log,
          // a stocked sandbox whose anchor dies goes, and the stock makes another (one already
          // taken is refused by its `handOver`)
          onCrash: () => {
            if (sandbox && this.#ready.includes(sandbox)) {
              void this.#discard(sandbox).then(() => this.refill());
            }
          },
          background: true,
        });
        // the egress's listener too: its start is the other serial step of a sandbox's use
        await sandbox.listenAhead(EGRESS_PORT);
        // and the process chain of a browser's Chromium, up to the command itself (a start of
        // another kind ends it unused)
        sandbox.prepareSpawn(BROWSER_STDIO);
        await this.#opts.prepare?.(sandbox);
      } catch (err) {
        await sandbox?.stop();
        await rm(dir, { recursive: true, force: true }).catch(() => {});
        const retryInMs = this.#retry.schedule(() => this.refill());
        log.warn({ err, retryInMs }, 'could not make a sandbox ahead');
        return;
      }
      this.#retry.succeeded();
      if (this.#closed) await this.#discard(sandbox);
      else this.#ready.push(sandbox);
    }
  }

  /** Stop a sandbox that will not be handed over, and remove its instance directory. */
  #discard(sandbox: Sandbox): Promise<void> {
    const at = this.#ready.indexOf(sandbox);
    if (at >= 0) this.#ready.splice(at, 1);
    const done = (async () => {
      await sandbox.stop();
      await rm(this.#opts.dirOf(sandbox.name), { recursive: true, force: true }).catch(() => {});
    })().finally(() => this.#discarding.delete(done));
    this.#discarding.add(done);
    return done;
  }

  /** Stop every sandbox of the stock; nothing is made after this. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#retry.cancel();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#filling;
    await Promise.all([...this.#ready.splice(0).map((s) => this.#discard(s)), ...this.#discarding]);
  }
}
