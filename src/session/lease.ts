/**
 * The lease: what a session holds once its instance is asked for, from the start request on (the
 * instance, its ledger entry, the driver's connection, the exit guard and the keepalive), and the
 * one `stop()` that gives it all back. The start itself waits out a server at its instance cap.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Instance, StartRequest } from '../api/index.js';
import { RateLimitError, type Burrow } from '../client/index.js';
import { debug } from '../client/debug.js';
import type { DriverConnection } from './driver.js';
import type { Endpoint } from './endpoint.js';
import { SessionStoppedError } from './errors.js';
import { guard } from './exit-guard.js';
import { driverBusy, hold } from './keepalive.js';
import type { Ledger } from './ledger.js';
import { stopInstance } from './reaper.js';
import type { StoppedSession } from './session-types.js';
import type { TransferSetup } from './transfer.js';

/** Timeout of each request made while stopping, so a dead server cannot hold up an exit. */
const STOP_TIMEOUT_MS = 30_000;

/**
 * Everything a session holds, from the start request on; `stop()` gives it all back, once. It is
 * guarded from the start, so a signal or crash while opening stops the instance too.
 */
export class Lease {
  /**
   * The start request. Never aborted: an abandoned start would leave an instance nobody knows
   * about, so `stop()` waits for it instead and stops what it started.
   */
  readonly started: Promise<Instance>;
  /** The ledger entry, written as soon as the instance id is known. */
  readonly recorded: Promise<void>;
  #conn: DriverConnection | undefined;
  /** Whether `conn` closed (`browser.close()`, a dropped socket) and nothing replaced it yet. */
  #connClosed = false;
  /** Files to and from this machine (transfer.ts); undefined with `transfer: false`. */
  transfer: TransferSetup | undefined;
  /** Set once `browser/start` was called (ubuntu), so stop calls `browser/stop`. */
  browserStarted = false;
  readonly #stopping = new AbortController();
  readonly #unguard: () => void;
  /** Keeps the process alive until `stop()` (keepalive.ts). */
  readonly #unhold: () => void;
  /** The instance id once the start answered, for the forgotten-stop notice. */
  #id: string | undefined;
  #stopped: Promise<StoppedSession | undefined> | undefined;

  constructor(
    readonly endpoint: Endpoint,
    readonly ledger: Ledger,
    body: StartRequest,
    opening: AbortSignal,
  ) {
    this.#unguard = guard(this);
    this.#unhold = hold({
      busy: () => (this.conn ? driverBusy(this.conn)() : !this.stopping),
      detached: () => this.#connClosed,
      id: () => this.#id,
      stop: () => this.stop(),
    });
    const { client, baseUrl, embedded } = endpoint;
    this.started = startWhenFree(client, body, AbortSignal.any([opening, this.#stopping.signal]));
    this.recorded = this.started.then((i) => {
      this.#id = i.id;
      return ledger.record(i.id, baseUrl, embedded);
    });
    this.recorded.catch(() => undefined); // awaited by openSession and stop()
  }

  get conn(): DriverConnection | undefined {
    return this.#conn;
  }

  set conn(conn: DriverConnection | undefined) {
    this.#conn = conn;
    this.#connClosed = false;
    void conn?.closed.then(() => {
      if (this.#conn === conn) this.#connClosed = true;
    });
  }

  /** Aborts when `stop()` begins: opening and reconnecting give up. */
  get signal(): AbortSignal {
    return this.#stopping.signal;
  }

  get stopping(): boolean {
    return this.#stopped !== undefined;
  }

  /** Resolves to undefined when the start itself failed, so there was nothing to stop. */
  stop(): Promise<StoppedSession | undefined> {
    return (this.#stopped ??= this.#teardown());
  }

  async #teardown(): Promise<StoppedSession | undefined> {
    this.#stopping.abort(new SessionStoppedError('reconnect'));
    const { client, baseUrl } = this.endpoint;
    const opts = { timeoutMs: STOP_TIMEOUT_MS };
    try {
      const instance = await this.started.catch(() => undefined);
      if (!instance) return undefined;
      const id = instance.id;
      // its ledger entry is settled first: kept for the reaper if the stop below fails
      await this.recorded.catch(() => undefined);
      await this.conn?.disconnect();
      // Best effort: stopping the instance below ends its browser too.
      if (this.browserStarted) await client.browser.stop(id, opts).catch(() => undefined);
      const status = await stopInstance(client, id, STOP_TIMEOUT_MS);
      await this.ledger.remove(id, baseUrl);
      return { instanceId: id, status };
    } finally {
      this.#unguard();
      this.#unhold();
      await this.endpoint.release();
    }
  }
}

/** Longest pause between start attempts while the server is at capacity. */
const CAPACITY_WAIT_MAX_MS = 10_000;

/**
 * `POST /v1/start`, again after each 429 (the server at its instance cap) once its `Retry-After`
 * has passed, until `signal` aborts (the start timeout). A start request already sent is never
 * aborted: an abandoned start would leave an instance nobody knows about.
 */
async function startWhenFree(
  client: Burrow,
  body: StartRequest,
  signal: AbortSignal,
): Promise<Instance> {
  for (let attempt = 0; ; attempt++) {
    signal.throwIfAborted();
    try {
      return await client.instances.start(body);
    } catch (err) {
      if (!(err instanceof RateLimitError)) throw err;
      if (attempt === 0) {
        // a wait that would otherwise look like a hang: say once why, and what ends it
        const detail = (err.body as { detail?: unknown } | undefined)?.detail;
        const why = typeof detail === 'string' ? detail : 'the server is at its instance cap';
        process.emitWarning(
          `burrow: ${why}; openSession waits for a free slot until its startTimeoutMs (stop an instance, or raise the cap with burrow serve --max-instances)`,
          { code: 'BURROW_AT_CAPACITY' },
        );
      }
      const wait = Math.min(
        CAPACITY_WAIT_MAX_MS,
        err.retryAfterMs ?? Math.min(CAPACITY_WAIT_MAX_MS, 500 * 2 ** attempt),
      );
      debug('session', `server at capacity (${err.message}); trying again in ${wait}ms`);
      try {
        await sleep(Math.max(50, wait), undefined, { signal });
      } catch {
        throw err; // the timeout (or stop()) ended the wait: the 429 is what happened
      }
    }
  }
}
