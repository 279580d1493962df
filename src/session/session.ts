/**
 * The bridge core: open → wait → connect → use → stop (docs/architecture.md). `openSession` hands
 * back only a fully open session; anything that fails after the instance exists stops it again.
 */
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PlaywrightConnection } from 'burrow-sandbox/playwright';
import type { PuppeteerConnection } from 'burrow-sandbox/puppeteer';
import type {
  ComputerAction,
  Instance,
  InstanceStatus,
  StartRequest,
  ToolResult,
} from '../api/index.js';
import { APIError, Burrow, BurrowError, NotFoundError, RateLimitError } from '../client/index.js';
import { debug, debugEnabled } from '../client/debug.js';
import { abortable } from '../internal/deadline.js';
import {
  sessionDownloads,
  sessionRecording,
  type SessionDownloads,
  type SessionRecording,
} from './artifacts.js';
import { findAuthState, sessionAuth, type SessionAuth } from './auth.js';
import { runHandoff, type HandoffOptions, type HandoffResult } from './handoff.js';
import type { DriverConnection, DriverModule, DriverName } from './driver.js';
import { embeddedServer } from './embedded.js';
import {
  PeerDependencyError,
  ReconnectError,
  SessionStartError,
  SessionStoppedError,
  withCleanupError,
} from './errors.js';
import { guard } from './exit-guard.js';
import { connectDetached, driverBusy, hold } from './keepalive.js';
import { Ledger } from './ledger.js';
import {
  resolveOptions,
  type OpenSessionOptions,
  type ReconnectPolicy,
  type ResolvedOptions,
} from './options.js';
import { reapOrphans, stopInstance } from './reaper.js';
import { connectDriver, transferSetup, type TransferSetup } from './transfer.js';

/** Timeout of each request made while stopping, so a dead server cannot hold up an exit. */
const STOP_TIMEOUT_MS = 30_000;
/** First and longest pause between status polls while the instance deploys. */
const POLL_MIN_MS = 100;
const POLL_MAX_MS = 2_000;

// ---------------------------------------------------------------------------------------------
// Public types

export type SessionEvents = {
  /** The CDP connection closed without `stop()` or `reconnect()` asking for it. */
  disconnected: [DisconnectedEvent];
  /** `reconnect()` (yours, or the automatic one) re-bound `browser`, `context` and `page`. */
  reconnected: [ReconnectedEvent];
  /** Automatic reconnecting gave up; the session stays open until you `stop()` it. */
  reconnectFailed: [ReconnectFailedEvent];
};

export interface DisconnectedEvent {
  /** What happened, e.g. "the CDP connection closed while instance inst_… is still running". */
  readonly reason: string;
  /** The instance's status right after; `gone` when the server no longer knows it. */
  readonly instanceStatus: InstanceStatus | 'gone' | 'unknown';
  /** Whether automatic reconnecting (option `reconnect`) is about to try. */
  readonly willReconnect: boolean;
  /**
   * Set when the instance ended with the cluster node it ran on (its `end_reason`): `node_lost`
   * when that node died, `node_drained` when it was drained past its deadline.
   */
  readonly endReason?: 'node_lost' | 'node_drained';
}

export interface ReconnectedEvent {
  /** Attempts it took: 1 for a call to `reconnect()`. */
  readonly attempts: number;
}

export interface ReconnectFailedEvent {
  readonly error: unknown;
  readonly attempts: number;
}

/** What `stop()` resolves to. */
export interface StoppedSession {
  readonly instanceId: string;
  /** `gone` when the server did not know the instance any more (a 404 on stop). */
  readonly status: 'terminated' | 'gone';
}

/** What both drivers' sessions offer. */
export interface SessionBase extends AsyncDisposable {
  readonly driver: DriverName;
  /** The instance's id (`instance.id`), as `burrow list` and the API name it. */
  readonly id: string;
  /** The instance record, as it was once running. */
  readonly instance: Instance;
  /** The current `cdp_url`: a `ws://` URL carrying the instance's token; keep it secret. */
  readonly cdpUrl: string;
  /** Whether the driver's CDP connection is open. */
  readonly connected: boolean;
  /** Save, update, apply and list auth states (by id or name). */
  readonly auth: SessionAuth;
  /** The instance's downloads, kept by the server: `list()`, `save(id, path)` (artifacts.ts). */
  readonly downloads: SessionDownloads;
  /** Screen recordings: `start()`, `stop()`, `list()`, `save(id, path)` (artifacts.ts). */
  readonly recording: SessionRecording;
  /** A PNG of the instance's screen (the server's `screenshot`). */
  screenshot(): Promise<Buffer>;
  /** URL of the browser's active tab (the server's `browser/current_url`). */
  currentUrl(): Promise<string>;
  /** URL of the instance's interactive live view (the server's `stream_url`). */
  streamUrl(): Promise<string>;
  /**
   * One mouse, keyboard or screen action on the instance (the server's `computer`), in the
   * coordinates of `screenshot()`. The result's `base64_image` holds a PNG taken after the action
   * unless `screenshot: false`; `get_cursor_position` answers `X=<x>,Y=<y>` in `output`.
   */
  computer(action: ComputerAction): Promise<ToolResult>;
  /**
   * Hands the instance to a person (a login's second factor, a CAPTCHA): a live view with
   * `message` and a Done button behind a token of its own. Its URL goes to `onUrl` (or to
   * stderr); resolves once the person pressed Done, rejects with a `HandoffError`
   * (`handoff_expired`, `handoff_cancelled`) otherwise.
   */
  handoff(options: HandoffOptions): Promise<HandoffResult>;
  /**
   * Sets the instance to expire `hours` from now (0.01–24; the server's `extend`: it replaces
   * the time left, it does not add to it). Resolves to the instance with its new `expires_at`.
   */
  extend(hours: number): Promise<Instance>;
  /**
   * Connects the driver again, to the same instance, and re-binds `browser`, `page` (and
   * `context`); objects taken from the old connection are dead. Concurrent calls share one
   * attempt.
   */
  reconnect(): Promise<void>;
  /**
   * Disconnects the driver (never closing the remote browser), stops the remote browser on
   * `ubuntu`, and stops the instance. Idempotent and safe to call concurrently; an instance the
   * server no longer knows counts as stopped. `await using` calls it.
   */
  stop(): Promise<StoppedSession>;
  on<E extends keyof SessionEvents>(event: E, listener: (...args: SessionEvents[E]) => void): this;
  once<E extends keyof SessionEvents>(
    event: E,
    listener: (...args: SessionEvents[E]) => void,
  ): this;
  off<E extends keyof SessionEvents>(event: E, listener: (...args: SessionEvents[E]) => void): this;
}

/** A session whose driver connection is `C`: `browser` and `page` have the driver's own types. */
export interface DriverSession<
  D extends DriverName,
  C extends DriverConnection,
> extends SessionBase {
  readonly driver: D;
  readonly browser: C['browser'];
  /** The default context's first page. */
  readonly page: C['page'];
}

/** A session driven by Playwright (playwright-core). */
export interface PlaywrightSession extends DriverSession<'playwright', PlaywrightConnection> {
  /** The remote browser's default context, the one applied auth states live in. */
  readonly context: PlaywrightConnection['context'];
}

/** A session driven by Puppeteer (puppeteer-core). */
export type PuppeteerSession = DriverSession<'puppeteer', PuppeteerConnection>;

export type Session = PlaywrightSession | PuppeteerSession;

// ---------------------------------------------------------------------------------------------
// Drivers and endpoints

/** Each driver's connection type. */
interface Connections {
  playwright: PlaywrightConnection;
  puppeteer: PuppeteerConnection;
}

/** The peer dependency each driver needs, and the entry point that loads it. */
const PEERS: Record<DriverName, readonly [pkg: string, neededBy: string]> = {
  playwright: ['playwright-core', 'burrow-sandbox/playwright'],
  puppeteer: ['puppeteer-core', 'burrow-sandbox/puppeteer'],
};

/** Throws `PeerDependencyError` when `driver`'s peer is not installed (before any instance). */
async function checkPeer(driver: DriverName): Promise<void> {
  const [pkg, neededBy] = PEERS[driver];
  const name: string = pkg; // a variable: the peer is optional, nothing may import it statically
  await PeerDependencyError.load(pkg, neededBy, () => import(name));
}

/** Adapters load through the public entry points; each loads its own peer dependency. */
const drivers: { [D in DriverName]: () => Promise<DriverModule<Connections[D]>> } = {
  playwright: () => import('burrow-sandbox/playwright'),
  puppeteer: () => import('burrow-sandbox/puppeteer'),
};

/** Where the API is, and how to give back what reaching it took. */
interface Endpoint {
  readonly client: Burrow;
  readonly baseUrl: string;
  /** The embedded server, which lives and dies with this process. */
  readonly embedded: boolean;
  /** Closes the client the session made for itself and releases its embedded-server lease. */
  release(): Promise<void>;
}

async function openEndpoint(endpoint: ResolvedOptions['endpoint']): Promise<Endpoint> {
  switch (endpoint.kind) {
    case 'client': {
      const { client } = endpoint;
      return { client, baseUrl: client.baseUrl, embedded: false, release: async () => {} };
    }
    case 'remote': {
      const client = new Burrow({ baseUrl: endpoint.baseUrl, apiKey: endpoint.apiKey });
      return { client, baseUrl: client.baseUrl, embedded: false, release: () => client.close() };
    }
    case 'embedded': {
      const lease = await embeddedServer();
      const client = new Burrow({ baseUrl: lease.url, apiKey: lease.apiKey });
      const release = async () => {
        await client.close();
        await lease.release();
      };
      return { client, baseUrl: client.baseUrl, embedded: true, release };
    }
  }
}

/** `promise`, unless `signal` aborts first; a value that arrives late goes to `onLate`. */
async function unlessAborted<T>(
  promise: Promise<T>,
  signal: AbortSignal,
  onLate: (value: T) => unknown,
): Promise<T> {
  signal.throwIfAborted();
  try {
    const value = await abortable(promise, signal);
    signal.throwIfAborted();
    return value;
  } catch (err) {
    promise.then(onLate, () => undefined);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// The lease: what a session holds once its instance exists

/**
 * Everything a session holds, from the start request on; `stop()` gives it all back, once. It is
 * guarded from the start, so a signal or crash while opening stops the instance too.
 */
class Lease {
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

// ---------------------------------------------------------------------------------------------
// The session

class BridgeSession<D extends DriverName> extends EventEmitter<SessionEvents> {
  readonly auth: SessionAuth;
  readonly downloads: SessionDownloads;
  readonly recording: SessionRecording;
  readonly #lease: Lease;
  readonly #load: () => Promise<DriverModule<Connections[D]>>;
  readonly #reconnectPolicy: ReconnectPolicy | undefined;
  /** Connections closed on purpose (by `reconnect()`), whose closing is no news. */
  readonly #retired = new WeakSet<DriverConnection>();
  readonly #closed = new WeakSet<DriverConnection>();
  #cdpUrl: string;
  #reconnecting: Promise<void> | undefined;

  constructor(
    readonly driver: D,
    readonly instance: Instance,
    lease: Lease & { conn: DriverConnection },
    cdpUrl: string,
    reconnect: ReconnectPolicy | undefined,
  ) {
    super();
    this.#lease = lease;
    this.#cdpUrl = cdpUrl;
    this.#load = drivers[driver];
    this.#reconnectPolicy = reconnect;
    this.auth = sessionAuth(lease.endpoint.client, instance.id, (what) => this.#ready(what));
    this.downloads = sessionDownloads(lease.endpoint.client, instance.id, (w) => this.#ready(w));
    this.recording = sessionRecording(lease.endpoint.client, instance.id, (w) => this.#ready(w));
    this.#watch(lease.conn);
  }

  get id(): string {
    return this.instance.id;
  }

  get cdpUrl(): string {
    return this.#cdpUrl;
  }

  get connected(): boolean {
    const { conn } = this.#lease;
    return !this.#lease.stopping && conn !== undefined && !this.#closed.has(conn);
  }

  get browser(): Connections[D]['browser'] {
    return this.#conn('browser').browser;
  }

  /** Playwright's default context (Puppeteer's connection has none). */
  get context(): PlaywrightConnection['context'] | undefined {
    const conn: DriverConnection & { context?: PlaywrightConnection['context'] } =
      this.#conn('context');
    return conn.context;
  }

  get page(): Connections[D]['page'] {
    return this.#conn('page').page;
  }

  async screenshot(): Promise<Buffer> {
    this.#ready('screenshot');
    const shot = await this.#client.instance.screenshot(this.instance.id);
    return Buffer.from(shot.base64_image, 'base64');
  }

  async currentUrl(): Promise<string> {
    this.#ready('currentUrl');
    return (await this.#client.browser.currentUrl(this.instance.id)).current_url;
  }

  async streamUrl(): Promise<string> {
    this.#ready('streamUrl');
    return (await this.#client.instance.streamUrl(this.instance.id)).stream_url;
  }

  computer(action: ComputerAction): Promise<ToolResult> {
    this.#ready('computer');
    return this.#client.instance.computer(this.instance.id, action);
  }

  handoff(options: HandoffOptions): Promise<HandoffResult> {
    this.#ready('handoff');
    return runHandoff(this.#client, this.instance.id, options);
  }

  extend(hours: number): Promise<Instance> {
    this.#ready('extend');
    return this.#client.instances.extend(this.instance.id, { timeout_hours: hours });
  }

  reconnect(): Promise<void> {
    this.#ready('reconnect');
    return this.#reconnect(1);
  }

  async stop(): Promise<StoppedSession> {
    return (await this.#lease.stop()) ?? { instanceId: this.instance.id, status: 'gone' };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  get #client(): Burrow {
    return this.#lease.endpoint.client;
  }

  #ready(what: string): void {
    if (this.#lease.stopping) throw new SessionStoppedError(what);
  }

  /** The live connection, which `drivers[this.driver]` made (or `reconnect()` did since). */
  #conn(what: string): Connections[D] {
    this.#ready(what);
    return this.#lease.conn as Connections[D];
  }

  #reconnect(attempts: number): Promise<void> {
    return (this.#reconnecting ??= (async () => {
      const lease = this.#lease;
      const old = lease.conn;
      if (old) {
        this.#retired.add(old);
        await old.disconnect();
      }
      const { signal } = lease;
      const { cdp_url } = await this.#client.browser.cdpUrl(this.instance.id, { signal });
      const driver = await this.#load();
      const connecting = connectDetached(() => connectDriver(driver, cdp_url, {}, lease.transfer));
      const conn = await unlessAborted(connecting, signal, (late) => late.disconnect()).catch(
        (err: unknown) => {
          if (err instanceof BurrowError) throw err;
          // the driver's own failure: one of ours, with it as the cause
          const why = (err as Error | undefined)?.message ?? String(err);
          throw new ReconnectError(this.instance.id, `reconnect failed: ${why}`, { cause: err });
        },
      );
      lease.conn = conn;
      this.#cdpUrl = cdp_url;
      this.#watch(conn);
      this.emit('reconnected', { attempts });
    })().finally(() => {
      this.#reconnecting = undefined;
    }));
  }

  /** Turns an unasked-for close of `conn` into a `disconnected` event (and maybe reconnects). */
  #watch(conn: DriverConnection): void {
    void conn.closed.then(async (reason) => {
      this.#closed.add(conn);
      if (this.#lease.stopping || this.#retired.has(conn) || this.#lease.conn !== conn) return;
      const { status, endReason, nodeDown } = await this.#state();
      const id = this.instance.id;
      const willReconnect = status === 'running' && this.#reconnectPolicy !== undefined;
      // a cluster's node that died under the instance is said as such (cluster/death.ts)
      const why =
        endReason === 'node_lost'
          ? `${reason}: the node instance ${id} ran on was lost (status ${status}, end_reason node_lost)`
          : nodeDown
            ? `${reason}: the node instance ${id} runs on does not answer (${nodeDown}): that node is down or cut off`
            : status === 'running'
              ? `${reason} while instance ${id} is still running`
              : endReason === 'node_drained'
                ? `${reason}; instance ${id} is ${status}: its node was drained (end_reason node_drained)`
                : `${reason}; instance ${id} is ${status}`;
      this.emit('disconnected', {
        reason: why,
        instanceStatus: status,
        willReconnect,
        ...((endReason === 'node_lost' || endReason === 'node_drained') && { endReason }),
      });
      if (willReconnect) await this.#autoReconnect(this.#reconnectPolicy!);
    });
  }

  async #status(): Promise<DisconnectedEvent['instanceStatus']> {
    return (await this.#state()).status;
  }

  /**
   * The instance's status and end reason as the server has them; `nodeDown`, the server's
   * detail, when a cluster node answered that the instance's own node does not answer.
   */
  async #state(): Promise<{
    status: DisconnectedEvent['instanceStatus'];
    endReason?: string;
    nodeDown?: string;
  }> {
    try {
      const row = await this.#client.instances.get(this.instance.id, { timeoutMs: 10_000 });
      return { status: row.status, ...(row.end_reason && { endReason: row.end_reason }) };
    } catch (err) {
      if (err instanceof NotFoundError) return { status: 'gone' };
      if (err instanceof APIError && err.serverCode === 'node_unreachable') {
        return { status: 'unknown', nodeDown: err.message };
      }
      return { status: 'unknown' };
    }
  }

  async #autoReconnect(policy: ReconnectPolicy): Promise<void> {
    let error: unknown;
    let attempts = 0;
    while (attempts < policy.retries) {
      const delay = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** attempts);
      attempts++;
      try {
        await sleep(delay * (0.75 + Math.random() / 2), undefined, { signal: this.#lease.signal });
        await this.#reconnect(attempts);
        return;
      } catch (err) {
        if (this.#lease.stopping) return;
        error = err;
        if ((await this.#status()) !== 'running') break;
      }
    }
    this.emit('reconnectFailed', { error, attempts });
  }
}

// ---------------------------------------------------------------------------------------------
// openSession

/**
 * Starts an instance, waits until it is `running`, connects the driver to its browser, applies
 * `authState` if given, and returns the live session. Stop it with `await using` or `stop()`.
 *
 * ```ts
 * await using session = await openSession({ authState: 'github' });
 * await session.page.goto('https://example.com');
 * ```
 */
export function openSession(
  options: OpenSessionOptions & { driver: 'puppeteer' },
): Promise<PuppeteerSession>;
export function openSession(
  options?: OpenSessionOptions & { driver?: 'playwright' },
): Promise<PlaywrightSession>;
export function openSession(options?: OpenSessionOptions): Promise<Session>;
export async function openSession(options: OpenSessionOptions = {}): Promise<Session> {
  const opts = resolveOptions(options);
  // a missing peer fails here, before the server or an instance exists
  await checkPeer(opts.driver);
  const endpoint = await openEndpoint(opts.endpoint);
  const { client } = endpoint;
  const ledger = new Ledger();
  const t0 = performance.now();
  const since = () => `${Math.round(performance.now() - t0)}ms`;
  const deadline = AbortSignal.timeout(opts.startTimeoutMs);
  let signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  let lease: Lease | undefined;
  let step = 'looking up the auth state';
  try {
    await reapOrphans({ client }).catch(() => undefined); // best effort; never blocks opening
    // an unknown or ambiguous auth state fails before an instance is started
    const state =
      opts.authState === undefined
        ? undefined
        : await findAuthState(client, opts.authState, { signal });
    step = 'starting the instance';
    debug('session', `${step} (${opts.instanceType}) on ${endpoint.baseUrl}`);
    lease = new Lease(endpoint, ledger, opts.start, signal);
    signal = AbortSignal.any([signal, lease.signal]);
    const instance = await unlessAborted(lease.started, signal, () => undefined);

    step = 'waiting until the instance is running';
    debug('session', `${instance.id}: ${step} (${since()})`);
    const running = await waitUntilRunning(client, instance, signal);
    step = 'getting the cdp_url';
    let cdpUrl: string;
    if (opts.instanceType === 'ubuntu') {
      lease.browserStarted = true;
      cdpUrl = (await client.browser.start(instance.id, { signal })).cdp_url;
    } else {
      cdpUrl = (await client.browser.cdpUrl(instance.id, { signal })).cdp_url;
    }
    step = `connecting ${opts.driver}`;
    debug('session', `${instance.id}: ${step} (${since()})`);
    const driver = await drivers[opts.driver]();
    const timeoutMs = Math.max(1, Math.round(opts.startTimeoutMs - (performance.now() - t0)));
    if (opts.transfer) lease.transfer = transferSetup(client, instance.id, opts.driver);
    // the driver's socket does not hold the process by itself; the lease's keeper does (keepalive.ts)
    const transfer = lease.transfer;
    const connecting = connectDetached(() =>
      connectDriver(driver, cdpUrl, { timeoutMs }, transfer),
    );
    const conn = await unlessAborted(connecting, signal, (late) => late.disconnect());
    lease.conn = conn;
    if (state !== undefined) {
      step = `applying auth state "${opts.authState}"`;
      debug('session', `${instance.id}: ${step} (${since()})`);
      await client.browser.authenticate(instance.id, { auth_state_id: state.id }, { signal });
    }
    // the ledger entry (an fsync'd file, ledger.ts) was begun as the start answered, as before;
    // only the wait for it moved here, off the way to a connected driver (a crash leaves the same
    // entry behind as it did), and the session is handed out once it is there
    step = 'recording the instance in the ledger';
    await lease.recorded;
    const session = new BridgeSession(
      opts.driver,
      running,
      lease as Lease & { conn: DriverConnection },
      cdpUrl,
      opts.reconnect,
    );
    if (debugEnabled('session')) {
      const live = await client.instance.streamUrl(instance.id, { signal }).then(
        (r) => r.stream_url,
        (err: unknown) => `unavailable (${(err as Error).message})`,
      );
      debug('session', `${instance.id}: open in ${since()}; live view: ${live}`);
    }
    return session as Session; // the overloads pick the driver from the options
  } catch (error) {
    let primary = error;
    if (lease?.signal.aborted && !opts.signal?.aborted) {
      primary = new SessionStoppedError(`openSession (while ${step})`);
    } else if (deadline.aborted && !opts.signal?.aborted) {
      const startError = await lease?.started.then(
        () => undefined,
        (e: unknown) => e,
      );
      const atCapacity = startError instanceof RateLimitError;
      primary = new SessionStartError(
        'start_timeout',
        (await lease?.started.catch(() => undefined))?.id,
        `The session did not open within ${opts.startTimeoutMs} ms (while ${step}${atCapacity ? ': the server stayed at its instance cap' : ''})`,
        { cause: atCapacity ? startError : error },
      );
    } else if (!(error instanceof BurrowError)) {
      // the driver's own failure (Playwright, Puppeteer) while connecting
      primary = new SessionStartError(
        'start_failed',
        (await lease?.started.catch(() => undefined))?.id,
        `openSession failed while ${step}: ${(error as Error | undefined)?.message ?? String(error)}`,
        { cause: error },
      );
    }
    debug(
      'session',
      `openSession failed while ${step} (${since()}): ${(primary as Error).message}`,
    );
    if (!lease) {
      await endpoint.release();
      throw primary;
    }
    // Stops the instance (once the start answered, if it was still under way).
    const secondary = await lease.stop().then(
      () => undefined,
      (err: unknown) => err,
    );
    throw withCleanupError(primary, secondary);
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

/** Polls until the instance is `running`; a `terminated` or `error` one will never be. */
async function waitUntilRunning(
  client: Burrow,
  instance: Instance,
  signal: AbortSignal,
): Promise<Instance> {
  let current = instance;
  let delay = POLL_MIN_MS;
  while (current.status !== 'running') {
    if (current.status === 'terminated' || current.status === 'error') {
      throw new SessionStartError(
        'start_failed',
        instance.id,
        `Instance ${instance.id} is ${current.status} instead of running`,
      );
    }
    await sleep(delay, undefined, { signal });
    delay = Math.min(POLL_MAX_MS, delay * 2);
    current = await client.instances.get(instance.id, { signal });
  }
  return current;
}
