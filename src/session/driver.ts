/**
 * What the session needs from a driver adapter (`burrow-sandbox/playwright`,
 * `burrow-sandbox/puppeteer`): connect to a `cdp_url`, hand back live objects, say when the socket
 * closed, and disconnect without closing the remote browser.
 */

export interface DriverConnection extends AsyncDisposable {
  readonly browser: unknown;
  readonly page: unknown;
  /**
   * Resolves once, with a reason, when the CDP connection closed: after `disconnect()` or
   * because the socket dropped.
   */
  readonly closed: Promise<string>;
  /** Close the CDP connection, leaving the remote browser running. Idempotent. */
  disconnect(): Promise<void>;
}

export interface DriverConnectOptions {
  /** Give up connecting after this many milliseconds. Default 30 000. */
  timeoutMs?: number;
  /**
   * The browser sees this machine's files (the session's transfer proxy, src/session/transfer.ts,
   * makes it so): Playwright then sets file inputs by path. Default false.
   */
  local?: boolean;
}

export type DriverName = 'playwright' | 'puppeteer';
