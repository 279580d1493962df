/**
 * `browser` instances: one headless Chromium, running from `start` to `stop`, reached by clients
 * through the authenticated CDP relay. The pieces are exported for the ubuntu runtime, which
 * runs the same controller headful on its display.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { InstanceRuntime, RuntimeContext, RuntimeFactory } from '../runtime.js';
import { BrowserController } from './controller.js';
import { refuseUpgrade } from './relay.js';

export { BrowserController, type BrowserControllerOptions } from './controller.js';
export { ChromiumSession, type ChromiumSessionOptions } from './session.js';
export {
  BASE_FLAGS,
  launchChromium,
  normalizeBlockedDomain,
  type LaunchOptions,
  type LaunchedChromium,
} from './chromium.js';
export { refuseUpgrade } from './relay.js';

/**
 * - `browser/start` returns the running browser's `cdp_url`.
 * - `browser/stop` stops Chromium but not the instance; `browser/start` launches it again (new
 *   `cdp_url`, same profile), and until then screenshot and the other `browser/*` operations
 *   answer 400. Generic clients that stop the browser before the instance keep working.
 * - Chromium dying on its own (or through a client's `Browser.close`) puts the instance in
 *   `error`.
 */
class BrowserRuntime implements InstanceRuntime {
  readonly browser: BrowserController;

  constructor(ctx: RuntimeContext) {
    this.browser = new BrowserController({ ctx, onCrash: (reason) => ctx.failed(reason) });
  }

  async start(): Promise<void> {
    await this.browser.start();
  }

  stop(): Promise<void> {
    return this.browser.dispose();
  }

  async pause(): Promise<void> {
    this.browser.pause();
  }

  async resume(): Promise<void> {
    this.browser.resume();
  }

  screenshot(): Promise<Buffer> {
    return this.browser.screenshot();
  }

  upgrade(
    kind: 'cdp' | 'stream',
    rest: string,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): void {
    if (kind === 'cdp') this.browser.upgrade(rest, req, socket, head);
    else refuseUpgrade(socket, 404, 'This instance has no live view stream yet');
  }
}

export const createBrowserRuntime: RuntimeFactory = (ctx) => new BrowserRuntime(ctx);
