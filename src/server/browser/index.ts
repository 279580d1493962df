/**
 * `browser` instances: one headless Chromium, running from `start` to `stop`, reached by clients
 * through the authenticated CDP relay. The Chromium layer itself lives in `../chromium/`, shared
 * with the ubuntu runtime.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type {
  ClaimRequest,
  ComputerCapability,
  FilesCapability,
  InstanceRuntime,
  LiveViewCapability,
  RuntimeContext,
  RuntimeFactory,
} from '../instances/runtime.js';
import { join, posix } from 'node:path';
import {
  BrowserController,
  CdpComputer,
  Screencast,
  type BrowserControllerOptions,
} from '../chromium/index.js';
import type { InstanceArtifacts } from '../artifacts/store.js';
import { ffmpegIn } from '../artifacts/ffmpeg.js';
import { recordScreencast } from '../chromium/recorder.js';
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
import { browserLiveViewPage } from './liveview-page.js';

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
  readonly artifacts: InstanceArtifacts | undefined;
  /** The context, with the resolution and blocked domains a warm-pool claim may change. */
  #ctx: RuntimeContext;
  /** `[width, height]`, shared by reference with the computer and the screencast. */
  readonly #resolution: [number, number];
  #computer: CdpComputer;
  #screencast: Screencast;
  #sandbox: Sandbox | undefined;
  #egress: InstanceEgress | undefined;
  /** `upload` into the instance's home (./files.ts). */
  readonly #files: BrowserFiles;

  constructor(ctx: RuntimeContext) {
    this.#resolution = [ctx.resolution[0], ctx.resolution[1]];
    this.#ctx = { ...ctx, resolution: this.#resolution };
    this.#files = new BrowserFiles(() => this.#sandbox, ctx.maxUploadBytes, ctx.log);
    this.artifacts = ctx.artifacts;
    this.browser = new BrowserController({
      ctx: this.#ctx, // replaced per launch: see #launchOptions
      downloads: ctx.artifacts,
      onCrash: (reason) => ctx.failed(reason),
      launch: () => this.#launchOptions(),
      // a navigation the egress would refuse fails as a local Chromium's would (issue 20)
      checkNavigation: async (url) => this.#egress?.checkNavigation(url),
    });
    this.#computer = this.#newComputer();
    this.#screencast = this.#newScreencast();
  }

  #newComputer(): CdpComputer {
    return new CdpComputer({
      page: () => this.browser.activePage(),
      screenshot: () => this.browser.screenshot(),
      resolution: this.#resolution,
    });
  }

  #newScreencast(): Screencast {
    return new Screencast({
      page: () => this.browser.activePage(),
      input: this.#computer,
      resolution: this.#resolution,
      log: this.#ctx.log,
    });
  }

  /**
   * A warm-pool instance gets its user: the egress enforces their blocked domains from now on,
   * every window takes their resolution, and the sandbox its normal CPU weight. Chromium's own
   * resolver rules (set at launch) stay empty, so the egress alone refuses blocked names; names
   * Chromium reaches without the egress (loopback ones, where the operator allows loopback) can
   * only be refused at launch, so such a request gets a fresh instance instead.
   */
  async claim(req: ClaimRequest): Promise<boolean> {
    const sandbox = this.#sandbox;
    if (!sandbox || sandbox.mode !== 'isolated' || !this.#egress) return false;
    const loopbackName = (d: string) => /(^|\.)localhost\.?$/i.test(d.trim());
    if (req.blockedDomains.some(loopbackName)) return false;
    this.#egress.setBlockedDomains(req.blockedDomains);
    this.#ctx = { ...this.#ctx, blockedDomains: [...req.blockedDomains] };
    const [width, height] = req.resolution;
    if (width !== this.#resolution[0] || height !== this.#resolution[1]) {
      this.#resolution[0] = width;
      this.#resolution[1] = height;
      // nobody has used them yet: fresh ones start from the new size's centre
      this.#computer = this.#newComputer();
      this.#screencast = this.#newScreencast();
      await this.browser.resize(width, height);
    }
    await sandbox.foreground();
    return true;
  }

  revoke(): void {
    this.browser.closeClients();
    void this.#screencast.close();
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
      members: () => sandbox.pids(),
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
      background: ctx.pooled ?? false,
    });
    this.#sandbox = sandbox;
    try {
      // Chromium's directories on the still empty disk, without a process inside (see seedHome)
      if (sandbox.mode === 'isolated') {
        await sandbox.seedHome([
          ...['profile', 'tmp', 'home'].map((d) => `${CHROMIUM_DIR}/${d}`),
          'Downloads',
          'Recordings',
        ]);
      }
      await this.#artifacts(sandbox);
      // the egress listener and Chromium start side by side: Chromium goes online only once a
      // page loads, and that waits for nothing but the listener's socket, which exists already
      // (kept as soon as it is open: when Chromium fails, stop() closes it)
      const egress =
        sandbox.mode === 'isolated'
          ? openEgress(sandbox, ctx.sandboxHost, ctx.blockedDomains, ctx.log).then(
              (opened) => (this.#egress = opened),
            )
          : undefined;
      const results = await Promise.allSettled([egress, this.browser.start()]);
      for (const r of results) if (r.status === 'rejected') throw r.reason;
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  async stop(): Promise<void> {
    // a paused instance is frozen: thaw it so Chromium can act on being stopped
    await this.#sandbox?.resume().catch(() => {});
    // a running recording is finalised and the artifacts copied out while the disk is there
    await this.artifacts?.finish();
    await this.#screencast.close();
    await this.browser.dispose();
    await this.#files.stop();
    this.#egress?.close();
    await this.#sandbox?.stop();
  }

  /** Downloads land in `~/Downloads`; recordings are the screencast through ffmpeg in the sandbox. */
  async #artifacts(sandbox: Sandbox): Promise<void> {
    const artifacts = this.artifacts;
    if (!artifacts) return;
    await artifacts.attach({
      host: sandbox.hostHome,
      inside: sandbox.home,
      budget: sandbox.limits.disk_bytes,
    });
    const recordings = posix.join(sandbox.home, 'Recordings');
    const box = ffmpegIn(
      sandbox,
      () => ({ PATH: SANDBOX_PATH, HOME: sandbox.home }),
      sandbox.mode === 'isolated' ? [recordings] : [], // seeded on the fresh disk in start()
    );
    artifacts.setRecorder(async (file, dir) => {
      await box.mkdir(dir);
      return recordScreencast(
        {
          page: () => this.browser.activePage(),
          size: this.#resolution,
          ffmpeg: box.ffmpeg,
          log: this.#ctx.log,
        },
        file,
      );
    });
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

  /** Files into the instance's home, for `DOM.setFileInputFiles` (./files.ts). */
  get files(): FilesCapability {
    return this.#files;
  }

  /** Screenshots of the active tab, and computer actions on it through CDP `Input.*`. */
  readonly computer: ComputerCapability = {
    screenshot: async () => this.browser.screenshot(),
    run: async (action) => this.#computer.run(action),
  };

  /** The live-view page: a CDP screencast of the active tab with input (chromium/screencast.ts). */
  readonly liveView: LiveViewCapability = {
    url: async () => {
      const { publicUrl, id, token } = this.#ctx;
      const base = publicUrl.replace(/\/+$/, '');
      return `${base}/stream/${encodeURIComponent(id)}/?token=${encodeURIComponent(token)}`;
    },
    page: async (rest) => browserLiveViewPage(rest),
  };

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
