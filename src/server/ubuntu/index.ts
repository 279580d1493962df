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
  KernelsCapability,
  LiveViewCapability,
  RuntimeContext,
  RuntimeFactory,
  ToolsCapability,
} from '../instances/runtime.js';
import { InstanceMachine, uploadSpoolDir } from '../instances/machine.js';
import { BashSessions } from './tools/bash.js';
import { UbuntuDesktop } from './desktop/desktop.js';
import { Display, type DisplayInfo } from './display.js';
import { EditTool } from './tools/edit.js';
import { InstanceEnv } from './tools/env.js';
import { FileTool } from './tools/file.js';
import { createKernels, type Kernels } from './kernels/index.js';
import { hostLoopbackAllowed, proxyEnv, type Sandbox } from '../sandbox/index.js';
import { Toolbox } from '../toolbox/toolbox.js';
import { InstanceFiles } from '../toolbox/fsops.js';
import { upload } from '../toolbox/upload.js';
import { ffmpegIn } from '../artifacts/ffmpeg.js';
import { recordDisplay } from './desktop/recorder.js';
import { stage } from '../../internal/stages.js';

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
  /** The instance's files as the edit, file and upload tools reach them: inside the sandbox. */
  files: InstanceFiles;
}

export class UbuntuRuntime extends InstanceMachine {
  /** The instance's environment (HOME, PATH, DISPLAY … plus variables set through the API). */
  readonly env: InstanceEnv;
  #started: Started | undefined;
  #revoked = false;

  constructor(ctx: RuntimeContext) {
    super(ctx);
    this.env = new InstanceEnv('/home/user', '/tmp');
  }

  /**
   * A warm-pool instance gets its user. Its display keeps the size it started with (Xvfb's
   * framebuffer cannot change), so the pool hands it only to a request of that size
   * (instances/pool.ts); the desktop browser, which has not run yet, is launched with the user's
   * blocked domains (it reads them from the context the machine updates).
   */
  protected async adopt(req: ClaimRequest): Promise<boolean> {
    const [w, h] = this.ctx.plan.resolution;
    return this.#started !== undefined && req.resolution[0] === w && req.resolution[1] === h;
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
      const { instance, services } = this.ctx;
      services.log.warn({ err, instance: instance.id }, 'could not start a kernel ahead of use');
    });
  }

  /** The display (beside the egress: neither needs the other), then the tools on it. */
  protected async boot(sandbox: Sandbox): Promise<void> {
    const { instance, plan, services } = this.ctx;
    this.env.setBase('HOME', sandbox.home);
    this.env.setBase('TMPDIR', sandbox.tmp);
    if (sandbox.mode === 'isolated') {
      for (const [k, v] of Object.entries(proxyEnv())) this.env.setBase(k, v);
    }
    const displayInfo = await stage('display', () =>
      Display.start(
        sandbox,
        plan.resolution,
        this.env.current(),
        (reason) => services.failed(reason),
        services.programs?.xvfb,
      ),
    );
    for (const [k, v] of Object.entries(displayInfo.sandboxEnv)) this.env.setBase(k, v);
    this.#recorder(sandbox, displayInfo);
    const exec = (argv: string[], timeoutMs: number) =>
      sandbox.exec(argv, { env: this.env.current(), timeoutMs });
    const writable = [sandbox.home, sandbox.tmp];
    const toolbox = new Toolbox({
      spawn: (argv, o) => sandbox.spawn(argv, o),
      home: sandbox.home,
      writable,
      log: services.log,
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
        log: services.log,
      }),
      desktop: new UbuntuDesktop({
        ctx: () => this.ctx,
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
          hostLoopback: hostLoopbackAllowed(services.sandboxHost),
          checkNavigation: async (url) => this.egress?.checkNavigation(url),
        },
      }),
      files,
    };
    if (plan.pooled) await this.#prepare(this.#started);
    services.log.info(
      { instance: instance.id, sandbox: sandbox.mode, display: displayInfo.number },
      'ubuntu instance started',
    );
  }

  /** The desktop (x11vnc, its browser), the shells, the kernels; the sandbox takes the display. */
  protected async halt(): Promise<void> {
    const s = this.#started;
    if (!s) return;
    await s.desktop.stop();
    await s.bash.stop();
    await s.kernels.stop();
  }

  /** Recordings of the display: x11grab inside the sandbox. */
  #recorder(sandbox: Sandbox, display: DisplayInfo): void {
    const artifacts = this.artifacts;
    const inside = display.sandboxEnv.DISPLAY;
    if (!artifacts || !inside) return;
    const box = ffmpegIn(sandbox, () => this.env.current());
    artifacts.setRecorder(async (file, dir) => {
      await box.mkdir(dir);
      return recordDisplay(
        { display: inside, size: this.ctx.plan.resolution, ffmpeg: box.ffmpeg },
        file,
      );
    });
  }

  protected override async beforePause(): Promise<void> {
    await this.#get().desktop.pause();
  }

  protected override async afterResume(): Promise<void> {
    await this.#get().desktop.resume();
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
      upload(this.#get().files, path, filename, mediaType, file, this.ctx.services.maxUploadBytes),
    spoolDir: () => uploadSpoolDir(this.created),
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
    const s = this.stopping || this.#revoked ? undefined : this.#started;
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
    if (this.stopping) throw serverError('instance_stopping');
    if (!this.#started) throw serverError('instance_not_ready');
    return this.#started;
  }
}

/** `RuntimeFactory` for `instance_type: "ubuntu"`. */
export const createUbuntuRuntime: RuntimeFactory = (ctx) => new UbuntuRuntime(ctx);

export { Sandbox } from '../sandbox/index.js';
export type { SandboxMode, SpawnOptions, ExecResult } from '../sandbox/index.js';
export type { DisplayInfo } from './display.js';
