/**
 * Navigations a client sends that the instance's egress would refuse fail in Chromium itself,
 * with the `net::ERR_*` a local browser gives for that cause (mux.ts `checkNavigation`): the
 * server attaches a session of its own to the page, pauses its document requests (`Fetch`, only
 * while this navigation is under way) and fails the one to the refused host. Navigations it lets
 * through are never paused.
 *
 * A client that intercepts requests itself (`page.route`, `setRequestInterception`) keeps them:
 * this module also knows which sessions of clients have `Fetch` enabled, and no trap is set on
 * their pages (their navigations get the proxy's refusal instead).
 */
import type { CdpParams } from './transport.js';
import type { Incoming, Parsed } from './wire.js';

/** What the traps need of the multiplexer. */
export interface TrapPort {
  /** A command of the mux itself on `sessionId` (or the root session): its reply, decoded. */
  command(method: string, params: CdpParams, sessionId?: string): Promise<Parsed>;
  /** A command of the mux itself whose reply nobody reads. */
  fire(method: string, params: CdpParams, sessionId: string): void;
  /** Detach a session of the server's own; its events are dropped until Chromium confirms. */
  detach(sessionId: string): void;
}

/** A navigation being failed: the server's own session on its page, with `Fetch` enabled. */
interface Trap {
  /** `host:port` of the refused URL (`URL.host`): its document requests fail. */
  readonly host: string;
  readonly reason: string;
  release(): void;
}

/** A navigation's trap outlives its `Page.navigate` by this long at most (no reply ever came). */
const TRAP_MS = 60_000;

export class NavigationTraps {
  readonly #port: TrapPort;
  /** The server's sessions failing a refused navigation. */
  readonly #traps = new Map<string, Trap>();
  /** Sessions on which a client enabled `Fetch` → their targets (undefined: the browser's). */
  readonly #fetching = new Map<string, string | undefined>();

  constructor(port: TrapPort) {
    this.#port = port;
  }

  /** A client's command on `session` (of `targetId`): `Fetch.enable` and `Fetch.disable` count. */
  command(method: string, session: string, targetId: string | undefined): void {
    if (method === 'Fetch.enable') this.#fetching.set(session, targetId);
    else if (method === 'Fetch.disable') this.#fetching.delete(session);
  }

  /** A client's session is gone. */
  forget(session: string): void {
    this.#fetching.delete(session);
  }

  /** Whether a client intercepts requests of `targetId` (or of the whole browser). */
  intercepting(targetId: string): boolean {
    for (const target of this.#fetching.values()) {
      if (target === undefined || target === targetId) return true;
    }
    return false;
  }

  /**
   * Fail the document requests of `targetId` to the host of `url` with `reason` until the
   * returned release is called (at the latest `TRAP_MS` from now). Rejects, with nothing left
   * behind, when Chromium refuses a step.
   */
  async set(targetId: string, url: string, reason: string): Promise<() => void> {
    const port = this.#port;
    const attached = await port.command('Target.attachToTarget', { targetId, flatten: true });
    const sessionId = attached.result?.sessionId;
    if (typeof sessionId !== 'string') throw new Error('Target.attachToTarget failed');
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      this.#traps.delete(sessionId);
      port.detach(sessionId);
    };
    // a plain one-shot timer: the trap goes when its navigation's reply comes, or after this
    const timer = setTimeout(release, TRAP_MS);
    timer.unref();
    this.#traps.set(sessionId, { host: new URL(url).host, reason, release });
    try {
      const patterns = [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Request' }];
      await port.command('Fetch.enable', { patterns }, sessionId);
    } catch (err) {
      release();
      throw err;
    }
    return release;
  }

  /**
   * A message on `sessionId`: true when it is a trap's (it is handled here: its paused document
   * requests fail or go on), false when it is not.
   */
  event(sessionId: string, msg: Incoming): boolean {
    const trap = this.#traps.get(sessionId);
    if (!trap) return false;
    if (msg.method !== 'Fetch.requestPaused') return true;
    let requestId: unknown;
    let host: string | undefined;
    try {
      const params = msg.parse().params;
      requestId = params?.requestId;
      const request = params?.request as { url?: unknown } | undefined;
      if (typeof request?.url === 'string') host = new URL(request.url).host;
    } catch {
      // too large to read: detaching lets every paused request go on
      trap.release();
      return true;
    }
    if (typeof requestId !== 'string') {
      trap.release();
      return true;
    }
    if (host === trap.host) {
      this.#port.fire('Fetch.failRequest', { requestId, errorReason: trap.reason }, sessionId);
    } else {
      this.#port.fire('Fetch.continueRequest', { requestId }, sessionId);
    }
    return true;
  }
}
