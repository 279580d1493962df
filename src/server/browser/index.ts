/**
 * `browser` instances: one headless Chromium, running from `start` to `stop`, reached by clients
 * through the authenticated CDP relay. The Chromium layer itself lives in `../chromium/`, shared
 * with the ubuntu runtime.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type { ParsedComputerAction, ToolResult, UploadResult } from '../../api/index.js';
import type { InstanceRuntime, RuntimeContext, RuntimeFactory } from '../runtime.js';
import { join, posix } from 'node:path';
import {
  BrowserController,
  CdpComputer,
  Screencast,
  type BrowserControllerOptions,
} from '../chromium/index.js';
import { refuseUpgrade, serverError } from '../errors.js';
import {
  chromiumProxyArgs,
  openEgress,
  Sandbox,
  SANDBOX_PATH,
  type InstanceEgress,
  type SandboxLimits,
} from '../sandbox/index.js';
import { BrowserFiles } from './files.js';
import { browserLiveViewPage, type StreamPage } from './liveview-page.js';

/** Chromium's profile, downloads and temp files, under the instance's home. */
const CHROMIUM_DIR = '.config/burrow-chromium';

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
  #sandbox: Sandbox | undefined;
  #egress: InstanceEgress | undefined;
  /** `upload` into the instance's home (./files.ts). */
  readonly #files: BrowserFiles;

  constructor(ctx: RuntimeContext) {
    this.#ctx = ctx;
    this.#files = new BrowserFiles(() => this.#sandbox, ctx.maxUploadBytes, ctx.log);
    this.browser = new BrowserController({
      ctx: { ...ctx, dir: ctx.dir }, // replaced per launch: see #launchOptions
      onCrash: (reason) => ctx.failed(reason),
      launch: () => this.#launchOptions(),
    });
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

  /**
   * Chromium runs inside the instance's sandbox as its unprivileged user, with Chromium's own
   * sandbox on; its profile, downloads and temp files are on the instance's disk, and its network
   * goes through the egress, which is where `localhost` pages of the host are allowed or not.
   */
  #launchOptions(): Partial<BrowserControllerOptions> {
    const sandbox = this.#sandbox!;
    if (sandbox.mode === 'none') {
      return {
        ctx: { ...this.#ctx, dir: join(sandbox.hostHome, CHROMIUM_DIR) },
        spawn: (argv, o) => sandbox.spawn(argv, { env: o.env, stdio: o.stdio }),
        // root cannot run Chromium's sandbox; this mode has no other
        args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
      };
    }
    return {
      ctx: { ...this.#ctx, dir: join(sandbox.hostHome, CHROMIUM_DIR) },
      processDir: posix.join(sandbox.home, CHROMIUM_DIR),
      spawn: (argv, o) => sandbox.spawn(argv, { env: o.env, stdio: o.stdio }),
      mkdir: async (paths) => {
        if (sandbox.seeded(paths)) return;
        const r = await sandbox.exec(['mkdir', '-p', '--', ...paths], {
          env: { PATH: SANDBOX_PATH, HOME: sandbox.home },
          timeoutMs: 10_000,
        });
        if (r.code !== 0) throw new Error(`mkdir failed: ${r.stderr.toString().trim()}`);
      },
      args: chromiumProxyArgs(true),
    };
  }

  async start(): Promise<void> {
    const ctx = this.#ctx;
    const sandbox = await Sandbox.create(ctx.sandboxHost, {
      dir: ctx.dir,
      name: ctx.id,
      log: ctx.log,
      onCrash: (reason) => ctx.failed(reason),
    });
    this.#sandbox = sandbox;
    try {
      // Chromium's directories on the still empty disk, without a process inside (see seedHome)
      if (sandbox.mode === 'isolated') {
        await sandbox.seedHome(['profile', 'tmp', 'home'].map((d) => `${CHROMIUM_DIR}/${d}`));
      }
      // the egress listener and Chromium start side by side: Chromium goes online only once a
      // page loads, and that waits for nothing but the listener's socket, which exists already
      const egress =
        sandbox.mode === 'isolated'
          ? openEgress(sandbox, ctx.sandboxHost, ctx.blockedDomains, ctx.log)
          : undefined;
      const [opened] = await Promise.allSettled([egress, this.browser.start()]).then((r) => {
        for (const x of r) if (x.status === 'rejected') throw x.reason;
        return r.map((x) => (x as PromiseFulfilledResult<unknown>).value);
      });
      this.#egress = opened as InstanceEgress | undefined;
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  async stop(): Promise<void> {
    // a paused instance is frozen: thaw it so Chromium can act on being stopped
    await this.#sandbox?.resume().catch(() => {});
    await this.#screencast.close();
    await this.browser.dispose();
    await this.#files.stop();
    this.#egress?.close();
    await this.#sandbox?.stop();
  }

  /** The cgroup freezer (or SIGSTOP of every process) stops the whole instance at once. */
  async pause(): Promise<void> {
    await this.#sandbox?.pause();
  }

  async resume(): Promise<void> {
    await this.#sandbox?.resume();
  }

  /** Limits that apply (GET /v1/instance/{id}). */
  get limits(): SandboxLimits | undefined {
    return this.#sandbox?.limits;
  }

  /** A file into the instance's home, for `DOM.setFileInputFiles` (./files.ts). */
  upload(
    path: string,
    filename: string,
    mediaType: string | undefined,
    file: Readable,
  ): Promise<UploadResult> {
    return this.#files.upload(path, filename, mediaType, file);
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
    else refuseUpgrade(socket, serverError('live_view_not_found'));
  }
}

export const createBrowserRuntime: RuntimeFactory = (ctx) => new BrowserRuntime(ctx);
