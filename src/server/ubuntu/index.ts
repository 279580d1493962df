/**
 * `ubuntu` instances: a sandbox (../sandbox/, whose ISOLATION.md is the threat model) with a virtual X display, persistent
 * bash sessions, the edit and file tools, uploads and an environment. Later capabilities (kernels,
 * computer actions, a headful browser) build on the sandbox, `display` and `env.current()`.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

import { refuseUpgrade, serverError } from '../errors.js';
import type {
  BrowserCapability,
  ClaimRequest,
  ComputerCapability,
  FilesCapability,
  InstanceRuntime,
  KernelsCapability,
  LiveViewCapability,
  RuntimeContext,
  RuntimeFactory,
  ToolsCapability,
} from '../instances/runtime.js';
import { BashSessions } from './tools/bash.js';
import { UbuntuDesktop } from './desktop/desktop.js';
import { Display, type DisplayInfo } from './display.js';
import { EditTool } from './tools/edit.js';
import { InstanceEnv } from './tools/env.js';
import { FileTool } from './tools/file.js';
import { createKernels, type Kernels } from './kernels/index.js';
import {
  hostLoopbackAllowed,
  openEgress,
  proxyEnv,
  Sandbox,
  type InstanceEgress,
  type SandboxLimits,
} from '../sandbox/index.js';
import { Toolbox } from '../toolbox/toolbox.js';
import { InstanceFiles } from '../toolbox/fsops.js';
import { upload } from '../toolbox/upload.js';
import type { InstanceArtifacts } from '../artifacts/store.js';
import { ffmpegIn } from '../artifacts/ffmpeg.js';
import { recordDisplay } from './desktop/recorder.js';

interface Started {
  sandbox: Sandbox;
  display: Display;
  bash: BashSessions;
  edit: EditTool;
  file: FileTool;
  /** Jupyter kernels and notebooks (kernels/index.ts); the bridge starts on first use. */
  kernels: Kernels;
  /** Computer actions, screenshots, live view and the desktop browser (desktop/). */
  desktop: UbuntuDesktop;
  /** The instance's egress proxy (isolated mode). */
  egress: InstanceEgress | undefined;
  /** The instance's files as the edit, file and upload tools reach them: inside the sandbox. */
  files: InstanceFiles;
}

export class UbuntuRuntime implements InstanceRuntime {
  /** The instance's environment (HOME, PATH, DISPLAY … plus variables set through the API). */
  readonly env: InstanceEnv;
  #started: Started | undefined;
  #stopping: Promise<void> | undefined;
  #revoked = false;
  /** The context; a warm-pool claim replaces its blocked domains (the desktop reads them here). */
  readonly ctx: RuntimeContext & { blockedDomains: readonly string[] };

  constructor(ctx: RuntimeContext) {
    this.ctx = { ...ctx };
    this.env = new InstanceEnv('/home/user', '/tmp');
  }

  /**
   * A warm-pool instance gets its user. Its display keeps the size it started with (Xvfb's
   * framebuffer cannot change), so the pool hands it only to a request of that size (instances/pool.ts);
   * the egress enforces the user's blocked domains from now on, and the desktop browser, which
   * has not run yet, is launched with them.
   */
  async claim(req: ClaimRequest): Promise<boolean> {
    const s = this.#started;
    const [w, h] = this.ctx.resolution;
    if (!s?.egress || req.resolution[0] !== w || req.resolution[1] !== h) return false;
    s.egress.setBlockedDomains(req.blockedDomains);
    this.ctx.blockedDomains = [...req.blockedDomains];
    await s.sandbox.foreground();
    return true;
  }

  revoke(): void {
    this.#revoked = true;
    this.#started?.desktop.browser.closeClients();
  }

  /**
   * What a warm-pool instance prepares before anyone claims it: the first bash session's shell
   * and the `python3` kernel of `code/execute`. A failure only costs the head start.
   */
  async #prepare(s: Started): Promise<void> {
    s.bash.prewarm();
    await s.kernels.warm('python3').catch((err: unknown) => {
      this.ctx.log.warn({ err, instance: this.ctx.id }, 'could not start a kernel ahead of use');
    });
  }

  async start(): Promise<void> {
    const { ctx } = this;
    const sandbox = await Sandbox.create(ctx.sandboxHost, {
      dir: ctx.dir,
      name: ctx.id,
      log: ctx.log,
      onCrash: (reason) => ctx.failed(reason),
      background: ctx.pooled ?? false,
    });
    let egress: InstanceEgress | undefined;
    try {
      this.env.setBase('HOME', sandbox.home);
      this.env.setBase('TMPDIR', sandbox.tmp);
      if (sandbox.mode === 'isolated') {
        for (const [k, v] of Object.entries(proxyEnv())) this.env.setBase(k, v);
      }
      // the egress listener and the display start side by side (neither needs the other)
      const opening =
        sandbox.mode === 'isolated'
          ? openEgress(sandbox, ctx.sandboxHost, ctx.blockedDomains, ctx.log).then(
              (e) => (egress = e),
            )
          : Promise.resolve();
      const starting = Display.start(sandbox, ctx.resolution, this.env.current(), (reason) =>
        ctx.failed(reason),
      );
      const [opened, display] = await Promise.allSettled([opening, starting]);
      if (opened.status === 'rejected') throw opened.reason;
      if (display.status === 'rejected') throw display.reason;
      const { value: displayInfo } = display;
      for (const [k, v] of Object.entries(displayInfo.sandboxEnv)) this.env.setBase(k, v);
      await this.#artifacts(sandbox, displayInfo);
      const exec = (argv: string[], timeoutMs: number) =>
        sandbox.exec(argv, { env: this.env.current(), timeoutMs });
      const writable = [sandbox.home, sandbox.tmp];
      const toolbox = new Toolbox({
        spawn: (argv, o) => sandbox.spawn(argv, o),
        home: sandbox.home,
        writable,
        log: ctx.log,
      });
      const files = new InstanceFiles(toolbox, writable);
      this.#started = {
        sandbox,
        display: displayInfo,
        bash: new BashSessions(sandbox, this.env),
        edit: new EditTool(files),
        file: new FileTool(files, exec),
        kernels: createKernels({
          spawn: (argv, o) => sandbox.spawn(argv, o),
          sandboxHome: sandbox.home,
          toolbox,
          env: () => this.env.current(),
          log: ctx.log,
        }),
        desktop: new UbuntuDesktop({
          ctx,
          displayEnv: displayInfo.hostEnv,
          runDir: sandbox.hostRun,
          browserSandbox: {
            spawn: (argv, o) => sandbox.spawn(argv, o),
            exec: (argv, o) => sandbox.exec(argv, o),
            pids: () => sandbox.pids(),
            env: () => this.env.current(),
            home: sandbox.home,
            hostHome: sandbox.hostHome,
            tmp: sandbox.tmp,
            isolated: sandbox.mode === 'isolated',
            hostLoopback: hostLoopbackAllowed(ctx.sandboxHost),
            checkNavigation: async (url) => egress?.checkNavigation(url),
          },
        }),
        egress,
        files,
      };
      if (ctx.pooled) await this.#prepare(this.#started);
      ctx.log.info(
        { instance: ctx.id, sandbox: sandbox.mode, display: displayInfo.number },
        'ubuntu instance started',
      );
    } catch (err) {
      egress?.close();
      await sandbox.stop();
      throw err;
    }
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      const s = this.#started;
      if (!s) return;
      // a paused instance is frozen: thaw it so its processes can act on being stopped
      await s.sandbox.resume().catch(() => {});
      // a running recording is finalised and the artifacts copied out while the disk is there
      await this.artifacts?.finish();
      await s.desktop.stop();
      await s.bash.stop();
      await s.kernels.stop();
      s.egress?.close();
      await s.sandbox.stop();
    })();
    return this.#stopping;
  }

  /** Downloads of the desktop browser and recordings of the display (x11grab in the sandbox). */
  get artifacts(): InstanceArtifacts | undefined {
    return this.ctx.artifacts;
  }

  async #artifacts(sandbox: Sandbox, display: DisplayInfo): Promise<void> {
    const artifacts = this.ctx.artifacts;
    if (!artifacts) return;
    await artifacts.attach({
      host: sandbox.hostHome,
      inside: sandbox.home,
      budget: sandbox.limits.disk_bytes,
    });
    const box = ffmpegIn(sandbox, () => this.env.current());
    const inside = display.sandboxEnv.DISPLAY;
    if (!inside) return;
    artifacts.setRecorder(async (file, dir) => {
      await box.mkdir(dir);
      return recordDisplay(
        { display: inside, size: this.ctx.resolution, ffmpeg: box.ffmpeg },
        file,
      );
    });
  }

  /** Limits that apply (GET /v1/instance/{id}). */
  get limits(): SandboxLimits | undefined {
    return this.#started?.sandbox.limits;
  }

  async pause(): Promise<void> {
    const s = this.#get();
    await s.desktop.pause();
    await s.sandbox.pause();
  }

  async resume(): Promise<void> {
    const s = this.#get();
    await s.sandbox.resume();
    await s.desktop.resume();
  }

  /** Screenshots and computer actions on the virtual display (desktop/). */
  readonly computer: ComputerCapability = {
    screenshot: async () => this.#get().desktop.screenshot(),
    run: async (action) => this.#get().desktop.run(action),
  };

  /** The noVNC live view; x11vnc starts on the first call for its URL. */
  readonly liveView: LiveViewCapability = {
    url: async () => this.#get().desktop.streamUrl(),
    page: async (rest, query) => this.#get().desktop.streamPage(rest, query),
  };

  /** Persistent bash sessions and the edit and file tools (tools/). */
  readonly tools: ToolsCapability = {
    bash: async (req) => this.#get().bash.handle(req),
    edit: async (req) => this.#get().edit.run(req),
    file: async (req) => this.#get().file.run(req),
  };

  /** Uploads into the instance's file system, written inside the sandbox (toolbox/upload.ts). */
  readonly files: FilesCapability = {
    upload: async (path, filename, mediaType, file) =>
      upload(this.#get().files, path, filename, mediaType, file, this.ctx.maxUploadBytes),
  };

  /** Code execution and notebooks (`.ipynb` files in the home), on Jupyter kernels (kernels/). */
  get kernels(): KernelsCapability {
    return this.#get().kernels;
  }

  /** `/stream/<id>/websockify` (x11vnc) and `/cdp/<id>/…` (the desktop browser). */
  upgrade(
    kind: 'cdp' | 'stream',
    rest: string,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): void {
    const s = this.#stopping || this.#revoked ? undefined : this.#started;
    if (!s) return refuseUpgrade(socket, serverError('instance_not_live'));
    s.desktop.upgrade(kind, rest, req, socket, head);
  }

  /** A headful Chromium on the instance's display (`browser/*`). */
  get browser(): BrowserCapability {
    return this.#get().desktop.browser;
  }

  /** The virtual display (number, environments for sandboxed and host-side X clients). */
  get display(): DisplayInfo {
    return this.#get().display;
  }

  /** The sandbox: its mode, view of paths, home and tmp. */
  get sandbox(): Sandbox {
    return this.#get().sandbox;
  }

  #get(): Started {
    if (this.#stopping) throw serverError('instance_stopping');
    if (!this.#started) throw serverError('instance_not_ready');
    return this.#started;
  }
}

/** `RuntimeFactory` for `instance_type: "ubuntu"`. */
export const createUbuntuRuntime: RuntimeFactory = (ctx) => new UbuntuRuntime(ctx);

export { Sandbox } from '../sandbox/index.js';
export type { SandboxMode, SpawnOptions, ExecResult } from '../sandbox/index.js';
export type { DisplayInfo } from './display.js';
