/**
 * The `browser/*` operations of an instance: a Chromium that can be started, stopped and started
 * again (a fresh process on the same profile, so persistent cookies survive, with a new
 * `cdp_url`). Start and stop run one at a time; `dispose()` stops for good.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { SerialQueue } from '../../internal/serial.js';
import { refuseUpgrade, serverError } from '../errors.js';
import { chromiumRefusal } from '../host/requirements.js';
import type { BrowserAuthData, BrowserCapability } from '../instances/runtime.js';
import { ChromiumSession, type ChromiumOptions } from './session.js';

export interface BrowserControllerOptions {
  /**
   * The Chromium to launch, read at each launch: a warm-pool claim may have changed the blocked
   * domains since, and the sandbox may be made after the controller (in-sandbox.ts builds it).
   */
  launch(): ChromiumOptions;
  /** Chromium died on its own while it should have been running. */
  onCrash(reason: string): void;
}

export class BrowserController implements BrowserCapability {
  readonly #opts: BrowserControllerOptions;
  #session: ChromiumSession | undefined;
  /** Starts and stops, one at a time. */
  readonly #queue = new SerialQueue();
  #disposed: Promise<void> | undefined;

  constructor(opts: BrowserControllerOptions) {
    this.#opts = opts;
  }

  /** Launch Chromium unless it runs; resolve with its `cdp_url`. */
  start(): Promise<string> {
    return this.#serial(async () => {
      if (this.#disposed) throw serverError('instance_stopping');
      this.#session ??= await this.#launch();
      return this.#session.cdpUrl;
    });
  }

  /**
   * Stop Chromium (its relays close, `cdp_url` dies); `start()` launches a new one. `flush`: let
   * it write its profile out first (ChromiumSession.close).
   */
  stop(opts: { flush?: boolean } = {}): Promise<void> {
    return this.#serial(async () => {
      const session = this.#session;
      this.#session = undefined;
      await session?.close(opts);
    });
  }

  /** Stop for good; idempotent. */
  dispose(opts: { flush?: boolean } = {}): Promise<void> {
    return (this.#disposed ??= this.stop(opts));
  }

  cdpUrl(): string {
    return this.#running().cdpUrl;
  }

  async currentUrl(): Promise<string> {
    return this.#running().currentUrl();
  }

  async screenshot(): Promise<Buffer> {
    return this.#running().screenshot();
  }

  /** The active tab, attached; for input and screencast. 400 when the browser is stopped. */
  async activePage(): ReturnType<ChromiumSession['activePage']> {
    return this.#running().activePage();
  }

  async captureAuth(maxBytes: number): Promise<BrowserAuthData> {
    return this.#running().captureAuth(maxBytes);
  }

  async applyAuth(data: BrowserAuthData): Promise<void> {
    return this.#running().applyAuth(data);
  }

  /** Give every window of the running browser a new size (see ChromiumSession.resize). */
  async resize(width: number, height: number): Promise<void> {
    await this.#session?.resize(width, height);
  }

  /** Close every client's CDP connection now; new ones are refused by the server's token check. */
  closeClients(): void {
    this.#session?.closeClients();
  }

  upgrade(rest: string, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.#session) this.#session.upgrade(rest, req, socket, head);
    else refuseUpgrade(socket, serverError('cdp_browser_not_running'));
  }

  async pause(): Promise<void> {
    await this.#session?.freeze();
  }

  resume(): void {
    this.#session?.thaw();
  }

  /** The instance is paused (frozen by its sandbox) or resumed. */
  frozen(on: boolean): void {
    this.#session?.frozen(on);
  }

  #running(): ChromiumSession {
    if (!this.#session) throw serverError('browser_not_running');
    return this.#session;
  }

  #serial<T>(step: () => Promise<T>): Promise<T> {
    return this.#queue.run(step);
  }

  #launch(): Promise<ChromiumSession> {
    const options = this.#opts.launch();
    // a missing Chromium is a 503 naming it and its package, not a failed spawn
    const lacking = chromiumRefusal(options.executablePath);
    if (lacking)
      return Promise.reject(serverError('instance_requirements_missing', { detail: lacking }));
    return ChromiumSession.launch({
      ...options,
      onExit: (reason) => {
        this.#session = undefined; // only the current session can exit on its own
        this.#opts.onCrash(reason);
      },
    });
  }
}
