/**
 * What the session needs from a driver adapter (`burrow-sandbox/playwright`,
 * `burrow-sandbox/puppeteer`): connect to a `cdp_url`, hand back live objects, say when the socket
 * closed, and disconnect without closing the remote browser.
 *
 * The adapters import this module (and nothing else of src/), so the session can name their
 * connection types without an import cycle between the two. What an adapter needs of the package
 * besides is handed on from here: the peer-dependency error, and the one deadline primitive of
 * src/internal/ (adapters may not import internal/ themselves).
 */
export { withDeadline } from '../internal/deadline.js';
export { PeerDependencyError } from './errors.js';

/** A live driver connection; `B`, `P` are the driver's browser and page types. */
export interface DriverConnection<B = unknown, P = unknown> extends AsyncDisposable {
  readonly browser: B;
  readonly page: P;
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

/** An adapter's entry point, as the session loads it. */
export interface DriverModule<C extends DriverConnection = DriverConnection> {
  connect(cdpUrl: string, options?: DriverConnectOptions): Promise<C>;
}

/** The drivers a session can connect, each an adapter loading its own peer dependency. */
export const DRIVER_NAMES = ['playwright', 'puppeteer'] as const;
export type DriverName = (typeof DRIVER_NAMES)[number];
