/**
 * `burrow-sandbox/puppeteer`: Puppeteer on a remote browser's `cdp_url`, from `openSession` or on
 * its own with any `cdp_url`.
 *
 * ```ts
 * import { connect } from 'burrow-sandbox/puppeteer';
 * await using conn = await connect(cdpUrl);
 * await conn.page.goto('http://127.0.0.1:3000/');
 * ```
 *
 * `page` is the first page of the default context (the one that sees applied auth states).
 * Disposing calls `browser.disconnect()`, never `browser.close()`, which would send
 * `Browser.close` and kill the remote browser. puppeteer-core is an optional peer dependency,
 * loaded here only.
 */
import type { Browser, Page } from 'puppeteer-core';
import {
  PeerDependencyError,
  withDeadline,
  type DriverConnectOptions,
  type DriverConnection,
} from '../../src/session/driver.js';

export type { DriverConnectOptions as ConnectOptions } from '../../src/session/driver.js';

export interface PuppeteerConnection extends DriverConnection<Browser, Page> {
  readonly browser: Browser;
  /** The default context's first page (created if it had none). */
  readonly page: Page;
}

/** Connects puppeteer-core; throws `PeerDependencyError` when it is not installed. */
export async function connect(
  cdpUrl: string,
  options: DriverConnectOptions = {},
): Promise<PuppeteerConnection> {
  const { default: puppeteer } = await PeerDependencyError.load(
    'puppeteer-core',
    'burrow-sandbox/puppeteer',
    () => import('puppeteer-core'),
  );
  const timeoutMs = options.timeoutMs ?? 30_000;
  const connecting = puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null });
  let browser: Browser;
  try {
    browser = await withDeadline(
      connecting,
      timeoutMs,
      () => new Error(`Puppeteer did not connect within ${timeoutMs} ms`),
    );
  } catch (err) {
    // a connection that comes after all is let go at once
    connecting.then((late) => late.disconnect()).catch(() => undefined);
    throw err;
  }
  let asked = false; // set before the driver call, which may emit 'disconnected' synchronously
  let disconnecting: Promise<void> | undefined;
  const closed = new Promise<string>((resolve) => {
    if (!browser.connected) resolve('the CDP connection closed');
    browser.once('disconnected', () =>
      resolve(asked ? 'disconnect() was called' : 'the CDP connection closed'),
    );
  });
  const disconnect = () => {
    asked = true;
    return (disconnecting ??= browser.disconnect().catch(() => undefined));
  };
  try {
    const context = browser.defaultBrowserContext();
    const page = (await context.pages())[0] ?? (await context.newPage());
    return { browser, page, closed, disconnect, [Symbol.asyncDispose]: disconnect };
  } catch (err) {
    await disconnect();
    throw err;
  }
}
