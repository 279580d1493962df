/**
 * `browser` instances: one headless Chromium, running from `start` to `stop`, reached by clients
 * through the authenticated CDP relay. The Chromium layer itself lives in `../chromium/`, shared
 * with the ubuntu runtime.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ParsedComputerAction, ToolResult } from '../../api/index.js';
import type { InstanceRuntime, RuntimeContext, RuntimeFactory } from '../runtime.js';
import { BrowserController, CdpComputer, refuseUpgrade, Screencast } from '../chromium/index.js';
import { browserLiveViewPage, type StreamPage } from './liveview-page.js';

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
  readonly #ctx: RuntimeContext;
  readonly #computer: CdpComputer;
  readonly #screencast: Screencast;

  constructor(ctx: RuntimeContext) {
    this.#ctx = ctx;
    this.browser = new BrowserController({ ctx, onCrash: (reason) => ctx.failed(reason) });
    const page = () => this.browser.activePage();
    this.#computer = new CdpComputer({
      page,
      screenshot: () => this.browser.screenshot(),
      resolution: ctx.resolution,
    });
    this.#screencast = new Screencast({
      page,
      input: this.#computer,
      resolution: ctx.resolution,
      log: ctx.log,
    });
  }

  async start(): Promise<void> {
    await this.browser.start();
  }

  async stop(): Promise<void> {
    await this.#screencast.close();
    await this.browser.dispose();
  }

  async pause(): Promise<void> {
    await this.browser.pause();
  }

  async resume(): Promise<void> {
    this.browser.resume();
  }

  screenshot(): Promise<Buffer> {
    return this.browser.screenshot();
  }

  /** Computer actions on the active tab through CDP `Input.*` (chromium/input.ts). */
  computer(action: ParsedComputerAction): Promise<ToolResult> {
    return this.#computer.run(action);
  }

  /** The live-view page: a CDP screencast of the active tab with input (chromium/screencast.ts). */
  async streamUrl(): Promise<string> {
    const { publicUrl, id, token } = this.#ctx;
    const base = publicUrl.replace(/\/+$/, '');
    return `${base}/stream/${encodeURIComponent(id)}/?token=${encodeURIComponent(token)}`;
  }

  async streamPage(rest: string): Promise<StreamPage> {
    return browserLiveViewPage(rest);
  }

  upgrade(
    kind: 'cdp' | 'stream',
    rest: string,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): void {
    if (kind === 'cdp') this.browser.upgrade(rest, req, socket, head);
    else if (rest === 'ws') this.#screencast.upgrade(req, socket, head);
    else refuseUpgrade(socket, 404, 'Unknown live view path');
  }
}

export const createBrowserRuntime: RuntimeFactory = (ctx) => new BrowserRuntime(ctx);
