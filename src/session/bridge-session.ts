/**
 * The session handed out once open: the driver's live objects, the instance's operations as
 * one-liners on the client, and what happens when the CDP connection closes unasked (an event,
 * and reconnecting by the session's policy). Everything it holds is its lease's (lease.ts).
 */
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PlaywrightConnection } from 'burrow-sandbox/playwright';
import type { ComputerAction, Instance, ToolResult } from '../api/index.js';
import { APIError, BurrowError, NotFoundError, type Burrow } from '../client/index.js';
import {
  sessionDownloads,
  sessionRecording,
  type SessionDownloads,
  type SessionRecording,
} from './artifacts.js';
import { sessionAuth, type SessionAuth } from './auth.js';
import type { DriverConnection, DriverModule, DriverName } from './driver.js';
import { drivers, unlessAborted, type Connections } from './endpoint.js';
import { ReconnectError, SessionStoppedError } from './errors.js';
import { runHandoff, type HandoffOptions, type HandoffResult } from './handoff.js';
import { connectDetached } from './keepalive.js';
import type { Lease } from './lease.js';
import type { ReconnectPolicy } from './options.js';
import type { DisconnectedEvent, SessionEvents, StoppedSession } from './session-types.js';
import { connectDriver } from './transfer.js';

export class BridgeSession<D extends DriverName> extends EventEmitter<SessionEvents> {
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
