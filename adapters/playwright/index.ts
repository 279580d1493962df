/**
 * `burrow-sandbox/playwright`: Playwright on a remote browser's `cdp_url`, from `openSession` or
 * on its own with any `cdp_url`.
 *
 * ```ts
 * import { connect } from 'burrow-sandbox/playwright';
 * await using conn = await connect(cdpUrl);
 * await conn.page.goto('http://127.0.0.1:3000/');
 * ```
 *
 * `context` is the browser's default context, the one that sees applied auth states
 * (`browser.newPage()` would open an isolated one); `page` is its first page. Disconnecting
 * leaves the remote browser running. playwright-core is an optional peer dependency, loaded here
 * only.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  PeerDependencyError,
  type DriverConnectOptions,
  type DriverConnection,
} from '../../src/session/driver.js';

export type { DriverConnectOptions as ConnectOptions } from '../../src/session/driver.js';

export interface PlaywrightConnection extends DriverConnection<Browser, Page> {
  readonly browser: Browser;
  /** The default context: `browser.contexts()[0]`. */
  readonly context: BrowserContext;
  /** The default context's first page (created if it had none). */
  readonly page: Page;
}

/** Connects playwright-core over CDP; throws `PeerDependencyError` when it is not installed. */
export async function connect(
  cdpUrl: string,
  options: DriverConnectOptions = {},
): Promise<PlaywrightConnection> {
  const { chromium } = await PeerDependencyError.load(
    'playwright-core',
    'burrow-sandbox/playwright',
    () => import('playwright-core'),
  );
  const browser = await chromium.connectOverCDP(cdpUrl, {
    timeout: options.timeoutMs ?? 30_000,
    ...(options.local && { isLocal: true }),
  });
  let asked = false; // set before the driver call, which may emit 'disconnected' synchronously
  let disconnecting: Promise<void> | undefined;
  const closed = new Promise<string>((resolve) => {
    if (!browser.isConnected()) resolve('the CDP connection closed');
    browser.once('disconnected', () =>
      resolve(asked ? 'disconnect() was called' : 'the CDP connection closed'),
    );
  });
  const disconnect = () => {
    asked = true;
    return (disconnecting ??= browser.close().catch(() => undefined));
  };
  try {
    const context = browser.contexts()[0];
    if (!context) throw new Error('The remote browser has no default context');
    const page = context.pages()[0] ?? (await context.newPage());
    return { browser, context, page, closed, disconnect, [Symbol.asyncDispose]: disconnect };
  } catch (err) {
    await disconnect();
    throw err;
  }
}
