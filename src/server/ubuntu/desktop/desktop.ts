/**
 * The desktop of an ubuntu instance, as the runtime wires it to the API: computer actions and
 * screenshots (computer.ts), the live view (x11vnc + noVNC: ../vnc.ts, ../liveview-page.ts) and
 * the headful desktop browser, all on the instance's X display.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ParsedComputerAction, ToolResult } from '../../../api/index.js';
import {
  BrowserController,
  chromiumInSandbox,
  liveViewUrl,
  type ChromiumSandbox,
} from '../../chromium/index.js';
import { ComputerRunner } from '../../computer/runner.js';
import { refuseUpgrade, serverError } from '../../errors.js';
import type { RuntimeContext, StreamPage } from '../../instances/runtime.js';
import { vncLiveViewPage } from '../liveview-page.js';
import { VncServer } from '../vnc.js';
import { connectInside, type NavigationRefusal } from '../../sandbox/index.js';
import { XComputer } from './computer.js';

export interface DesktopOptions {
  /** The instance's context, read at each use: a warm-pool claim replaces it with the user's. */
  ctx: () => RuntimeContext;
  /** Environment naming the instance's display for X clients on the host (`DISPLAY`, `XAUTHORITY`). */
  displayEnv: Readonly<Record<string, string>>;
  /** A server-only directory of the instance (x11vnc's password file). */
  runDir: string;
  /** Where the desktop browser runs: inside the instance's sandbox (../../sandbox/ISOLATION.md). */
  browserSandbox: BrowserSandbox;
}

/** What the desktop (its browser, x11vnc, xdotool) needs of the instance's sandbox. */
export interface BrowserSandbox extends ChromiumSandbox {
  /** Run a command in the sandbox to completion (`Sandbox.exec`). */
  exec(
    argv: string[],
    opts: { env: Record<string, string>; timeoutMs: number; stdin?: string },
  ): Promise<{ code: number | null; stdout: Buffer; stderr: Buffer; timedOut: boolean }>;
  /** The instance's /tmp as seen inside (x11vnc's socket). */
  tmp: string;
  /**
   * The instance is sandboxed: its network goes through burrow's egress proxy, and its sockets
   * are connected from inside (`connectInside`), never by a host path.
   */
  isolated: boolean;
  /** The browser's loopback is the host's (operator allowed host loopback ports). */
  hostLoopback: boolean;
  /** How a navigation the instance's egress would refuse fails instead (network.ts). */
  checkNavigation?: (url: string) => Promise<NavigationRefusal | undefined>;
  /** The instance's environment as processes in the sandbox get it (HOME, DISPLAY, XAUTHORITY …). */
  env(): Record<string, string>;
}

/** The desktop browser's own flags, besides those of every Chromium in a sandbox. */
const DESKTOP_BROWSER_ARGS = [
  '--window-position=0,0',
  '--disable-infobars',
  '--no-default-browser-check',
  // bubblewrap's minimal /dev/shm need not be writable for an unprivileged server: use /tmp
  '--disable-dev-shm-usage',
];

/**
 * The instance's environment for its desktop browser, without TMPDIR: the launcher's own (short)
 * directory holds Chromium's sockets.
 */
function chromiumEnv(box: BrowserSandbox): Record<string, string> {
  const { TMPDIR: _tmpdir, ...rest } = box.env();
  return rest;
}

/**
 * Computer actions and screenshots (xdotool + X11), the live view (x11vnc + noVNC) and the
 * headful browser of one ubuntu instance's display. xdotool, x11vnc and the browser run inside
 * the instance; all are paused, resumed and stopped with it.
 */
export class UbuntuDesktop {
  readonly computer: XComputer;
  /** Computer actions on `computer`, one at a time. */
  readonly #actions: ComputerRunner<string>;
  readonly vnc: VncServer;
  /** `browser/*` on the desktop: a headful Chromium on the display with the same CDP relay. */
  readonly browser: BrowserController;
  readonly #ctx: () => RuntimeContext;
  #stopping: Promise<void> | undefined;

  constructor(opts: DesktopOptions) {
    const { displayEnv, runDir, browserSandbox: box } = opts;
    this.#ctx = opts.ctx;
    const ctx = opts.ctx(); // what a claim leaves as it was: the instance, the services, the size
    const { instance, services } = ctx;
    const display = displayEnv.DISPLAY;
    if (!display) throw new Error('the display environment has no DISPLAY');
    const inside = box.env();
    this.computer = new XComputer({
      display,
      xauthority: displayEnv.XAUTHORITY,
      // made once and kept by the X client (no-isolation: Xvfb's socket on the host)
      connect: box.isolated ? (path) => connectInside(box, path) : undefined,
      resolution: ctx.plan.resolution,
      // xdotool and x11vnc parse replies of an X server the instance controls: they run in there
      xdotoolIn: {
        exec: (argv, o) => box.exec(argv, { ...o, env: { ...box.env(), ...o.env } }),
        display: inside.DISPLAY ?? display,
        xauthority: inside.XAUTHORITY,
      },
    });
    this.#actions = new ComputerRunner(this.computer);
    // in an instance x11vnc runs inside and each viewer is connected from inside; without
    // isolation it is a child of the server on 127.0.0.1 (a Unix socket path in the instance
    // directory would pass the 108-byte limit)
    this.vnc = new VncServer(
      box.isolated
        ? {
            displayEnv: { DISPLAY: inside.DISPLAY ?? display, XAUTHORITY: inside.XAUTHORITY ?? '' },
            runDir,
            log: services.log,
            ...(services.programs && { x11vnc: services.programs.x11vnc }),
            sandbox: {
              spawn: (argv, o) => box.spawn(argv, { ...o, env: { ...box.env(), ...o.env } }),
              tmp: box.tmp,
              connect: (path) => connectInside(box, path),
            },
          }
        : {
            displayEnv,
            runDir,
            log: services.log,
            ...(services.programs && { x11vnc: services.programs.x11vnc }),
          },
    );
    // Chromium runs inside the sandbox (../../chromium/in-sandbox.ts), so a page sees only what
    // the instance's processes see (file:// included); its profile and downloads are in the
    // instance's home. Built at each launch: a warm-pool claim may have changed the blocked
    // domains since.
    this.browser = new BrowserController({
      launch: () =>
        chromiumInSandbox(this.#ctx(), {
          sandbox: box,
          headless: false,
          env: chromiumEnv(box),
          args: DESKTOP_BROWSER_ARGS,
          // without host loopback, loopback names stay the instance's own
          loopbackViaEgress: box.hostLoopback,
          checkNavigation: box.checkNavigation,
        }),
      // a user closing the desktop browser is not an instance failure: browser/start opens it again
      onCrash: (reason) =>
        services.log.info({ instance: instance.id, reason }, 'desktop browser exited'),
    });
  }

  screenshot(): Promise<Buffer> {
    return this.computer.screenshot();
  }

  run(action: ParsedComputerAction): Promise<ToolResult> {
    return this.#actions.run(action);
  }

  /** Starts x11vnc if need be; the URL of the live-view page, carrying the instance token. */
  async streamUrl(): Promise<string> {
    await this.vnc.ensure();
    const { instance, services } = this.#ctx();
    return liveViewUrl(services.publicUrl, instance.id, instance.token);
  }

  streamPage(rest: string, query: URLSearchParams): Promise<StreamPage> {
    return vncLiveViewPage(rest, query, { password: this.vnc.password });
  }

  /** `/stream/<id>/websockify` → x11vnc; `/cdp/<id>/…` → the desktop browser's relay. */
  upgrade(
    kind: 'cdp' | 'stream',
    rest: string,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): void {
    if (kind === 'cdp') this.browser.upgrade(rest, req, socket, head);
    else if (rest === 'websockify') this.vnc.upgrade(req, socket, head);
    else refuseUpgrade(socket, serverError('live_view_not_found'));
  }

  async pause(): Promise<void> {
    await this.browser.pause();
    await this.vnc.pause();
  }

  async resume(): Promise<void> {
    await this.vnc.resume();
    this.browser.resume();
  }

  /** Stops x11vnc and the browser, closes the X connection. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await Promise.all([this.vnc.stop(), this.browser.dispose()]);
      this.computer.close();
    })();
    return this.#stopping;
  }
}
