/**
 * One running Chromium and what the server does with it: its DevTools pipe shared by the server
 * and the CDP relay behind `cdp_url` (mux.ts), tab and origin tracking, the active tab's URL and
 * screenshot, auth capture and apply.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import { serverError } from '../errors.js';
import type { BrowserAuthData, Logger } from '../instances/runtime.js';
import { applyAuth, authOrigins, captureAuth, originOf, type AuthScope } from './auth.js';
import { CdpConnection, CdpError } from './cdp.js';
import { pngSize } from '../../internal/png.js';
import { launchChromium, type LaunchOptions, type LaunchedChromium } from './chromium.js';
import { DownloadWatch, type DownloadSink } from './downloads.js';
import { IdentityOverrides } from './identity.js';
import type { BrowserIdentity } from '../../api/identity.js';
import { CdpMux, type CdpMuxOptions } from './mux.js';
import { CdpRelay } from './relay.js';
import { stage } from '../../internal/stages.js';

/** How long a closed DevTools pipe waits for Chromium's exit to tell why. */
const PIPE_EXIT_GRACE_MS = 2000;
/** How long a stop that keeps the profile waits for Chromium's own exit (`close({flush})`). */
const FLUSH_MS = 5000;

/**
 * One Chromium as the Chromium layer takes it: a plain options object, with nothing of the
 * instance it serves besides what it says here (in-sandbox.ts builds it from an instance).
 */
export interface ChromiumOptions extends LaunchOptions {
  /**
   * Size every browser window's content area to `windowSize`, so that the viewport (and a
   * screenshot) is exactly that size. Default: `headless`.
   */
  fitViewport?: boolean;
  /** Public prefix of this browser's relay, e.g. `ws://127.0.0.1:8787/cdp/<instance id>`. */
  relayUrl: string;
  /** Per-instance secret appended to `cdp_url`. */
  token: string;
  log: Logger;
  /** Where downloads are kept and reported (the instance's artifacts, downloads.ts). */
  downloads?: DownloadSink | undefined;
  /** How a client's navigation the egress would refuse fails instead (mux.ts `checkNavigation`). */
  checkNavigation?: CdpMuxOptions['checkNavigation'];
  /** Device and identity every page gets before it runs (identity.ts). */
  identity?: BrowserIdentity | undefined;
}

export interface ChromiumSessionOptions extends ChromiumOptions {
  /** Chromium exited although `close()` was not called. */
  onExit(reason: string): void;
}

interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
  browserContextId?: string;
}

export class ChromiumSession implements AuthScope {
  /** `ws://<public host>/cdp/<id>/devtools/browser/<guid>?token=<token>` */
  readonly cdpUrl: string;
  readonly cdp: CdpConnection;
  readonly #chromium: LaunchedChromium;
  readonly #relay: CdpRelay;
  readonly #mux: CdpMux;
  readonly #opts: ChromiumSessionOptions;
  /** Open tabs of the default context, by target id. */
  readonly #tabs = new Map<string, TargetInfo>();
  /**
   * Page targets of every context, least recently activated first: a page counts as activated
   * when it opens and when anyone brings it to front over CDP (`Target.activateTarget`,
   * `Page.bringToFront`). The last one is the active tab.
   */
  readonly #activation = new Set<string>();
  readonly #origins = new Set<string>();
  readonly #sessions = new Map<string, Promise<string>>();
  /** Window id → its `Browser.setContentsSize` call. */
  readonly #fittedWindows = new Map<number, Promise<unknown>>();
  #defaultContextId = '';
  readonly #downloads: DownloadWatch | undefined;
  readonly #identity: IdentityOverrides | undefined;
  #closing: Promise<void> | undefined;

  /** Launch Chromium and resolve once CDP answers and the first window has its size. */
  static async launch(opts: ChromiumSessionOptions): Promise<ChromiumSession> {
    const chromium = await launchChromium(opts);
    const session = new ChromiumSession(chromium, opts);
    try {
      await stage('chromium.first-target', () => session.#init());
    } catch (err) {
      await session.close();
      throw err;
    }
    session.#watchExit();
    return session;
  }

  private constructor(chromium: LaunchedChromium, opts: ChromiumSessionOptions) {
    this.#chromium = chromium;
    this.#opts = opts;
    const downloads = opts.downloads && new DownloadWatch(opts.downloads);
    this.#downloads = downloads;
    this.#identity = opts.identity && new IdentityOverrides(opts.identity);
    const mux = new CdpMux(chromium.pipe, {
      onActivate: (targetId) => this.#activated(targetId),
      ...(opts.checkNavigation && { checkNavigation: opts.checkNavigation }),
      ...(downloads && {
        rewrite: (method, params) => downloads.rewrite(method, params),
        onContextCreated: (id) => downloads.contextCreated(id),
        onClientClosed: () => downloads.reassert(),
      }),
    });
    this.cdp = new CdpConnection(mux.root);
    this.#mux = mux;
    this.#relay = new CdpRelay(mux, chromium.browserId, opts.log);
    const browserPath = `/devtools/browser/${chromium.browserId}`;
    this.cdpUrl = `${opts.relayUrl}${browserPath}?token=${encodeURIComponent(opts.token)}`;
  }

  /**
   * Chromium exiting, or its DevTools pipe closing under it, ends this session: the browser is
   * killed and `onExit` says why, so that no browser is left running that the server cannot
   * reach. A pipe that closes as Chromium dies lets the exit name the cause.
   */
  #watchExit(): void {
    const chromium = this.#chromium;
    const ended = (reason: string) => {
      if (this.#closing) return;
      this.#opts.log.warn({ stderr: chromium.stderrTail() }, reason);
      void this.close();
      this.#opts.onExit(reason);
    };
    const exited = chromium.process.exited.then(({ code, signal }) => {
      return `Chromium exited unexpectedly (${signal ?? `code ${code}`})`;
    });
    void exited.then(ended);
    void this.cdp.closed.then(async () => {
      const failure = chromium.pipe.failure;
      if (failure) {
        this.#opts.log.error({ failure }, "Chromium's DevTools pipe broke a bound; killing it");
        return ended(`Chromium's DevTools pipe was closed: ${failure}`);
      }
      const reason = await raceDeadline(exited, PIPE_EXIT_GRACE_MS, { unref: true });
      ended(reason === TIMED_OUT ? "Chromium's DevTools pipe closed" : reason);
    });
  }

  /**
   * The commands go out together rather than one after the other: Chromium, just started, is
   * still opening its first tab and answers each late (15-20 ms apart under load), and four such
   * waits in a row were most of this stage; now the fit of the first window waits for its page
   * only. Targets reported before the default context's id is known are tracked once it is, in
   * the order they came.
   */
  async #init(): Promise<void> {
    const { cdp } = this;
    const contextId = cdp
      .send<{ defaultBrowserContextId: string }>('Target.getBrowserContexts')
      .then((r) => r.defaultBrowserContextId);
    let early: TargetInfo[] | undefined = [];
    const track = (info: TargetInfo) => (early ? early.push(info) : this.#track(info));
    const fit = this.#opts.fitViewport ?? this.#opts.headless !== false;
    /** The windows being fitted as their pages are reported during this start, by page. */
    let fitting: Map<string, Promise<void>> | undefined = new Map();
    cdp.on('Target.targetCreated', (p) => {
      const info = p.targetInfo as TargetInfo;
      track(info);
      if (info.type === 'page') this.#activation.add(info.targetId);
      if (fit && info.type === 'page') {
        const fitted = this.#fitWindow(info.targetId);
        fitting?.set(info.targetId, fitted);
      }
    });
    cdp.on('Target.targetInfoChanged', (p) => track(p.targetInfo as TargetInfo));
    cdp.on('Target.targetDestroyed', ({ targetId }) => {
      early = early?.filter((info) => info.targetId !== targetId);
      this.#tabs.delete(targetId as string);
      this.#activation.delete(targetId as string);
      this.#sessions.delete(targetId as string);
    });
    // on the root session this also reports the sessions of relay clients (mux.ts): forget only
    // this server's own session of the target
    cdp.on('Target.detachedFromTarget', ({ targetId, sessionId }) => {
      const session = this.#sessions.get(targetId as string);
      void session?.then(
        (id) => {
          if (id === sessionId && this.#sessions.get(targetId as string) === session) {
            this.#sessions.delete(targetId as string);
          }
        },
        () => {},
      );
    });
    const tracked = contextId.then((id) => {
      this.#defaultContextId = id;
      for (const info of early ?? []) this.#track(info);
      early = undefined;
    });
    // Chromium reads its cookie database on the first request that needs it: a local launch's
    // startup happens to do so long before its first page, but here it was the first `goto`'s,
    // 5-8 ms on its path (seen in a net log). Asking for the cookies now reads it while the
    // first tab opens; nothing waits for the answer.
    cdp.send('Storage.getCookies').catch(() => {});
    await Promise.all([
      tracked,
      this.#downloads?.start(cdp, contextId),
      this.#identity?.start(cdp),
      cdp.send('Target.setDiscoverTargets', { discover: true }), // reports existing targets
    ]);
    const fits = fitting;
    fitting = undefined;
    if (fit)
      await Promise.all(
        this.tabs().map((t) => fits.get(t.targetId) ?? this.#fitWindow(t.targetId)),
      );
  }

  #track(info: TargetInfo): void {
    if (info.browserContextId !== this.#defaultContextId) return;
    if (info.type !== 'page' && info.type !== 'iframe') return;
    const origin = originOf(info.url);
    if (origin) this.#origins.add(origin);
    if (info.type === 'page') this.#tabs.set(info.targetId, info);
  }

  /** Give the window of `targetId` a content area of exactly `windowSize`, once per window. */
  async #fitWindow(targetId: string): Promise<void> {
    const [width, height] = this.#opts.windowSize;
    try {
      const { windowId } = await this.cdp.send<{ windowId: number }>('Browser.getWindowForTarget', {
        targetId,
      });
      let fitted = this.#fittedWindows.get(windowId);
      if (!fitted) {
        fitted = this.cdp.send('Browser.setContentsSize', { windowId, width, height });
        this.#fittedWindows.set(windowId, fitted);
      }
      await fitted;
    } catch (err) {
      this.#opts.log.warn({ err, targetId }, 'could not size the browser window');
    }
  }

  /**
   * Size every window to `width`×`height` (a warm-pool instance taking its user's resolution).
   * Windows opened later get the new size too.
   */
  async resize(width: number, height: number): Promise<void> {
    this.#opts.windowSize = [width, height];
    this.#fittedWindows.clear();
    await Promise.all(this.tabs().map((t) => this.#fitWindow(t.targetId)));
  }

  /** Close every client's CDP connection (the instance was stopped). */
  closeClients(): void {
    this.#relay.closeAll();
  }

  /** `targetId` was brought to front: it becomes the active tab if it is an open page. */
  #activated(targetId: string): void {
    if (this.#activation.delete(targetId)) this.#activation.add(targetId);
  }

  tabs(): TargetInfo[] {
    return [...this.#tabs.values()];
  }

  origins(): Iterable<string> {
    return this.#origins;
  }

  attach(targetId: string): Promise<string> {
    let session = this.#sessions.get(targetId);
    if (!session) {
      session = this.cdp
        .send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true })
        .then((r) => r.sessionId);
      session.catch(() => this.#sessions.delete(targetId));
      this.#sessions.set(targetId, session);
    }
    return session;
  }

  /**
   * The active tab: the page most recently opened or brought to front, in any context (CDP's
   * `Target` domain has no activation order; `#activation` keeps it).
   */
  #activeTab(): string {
    let last: string | undefined;
    for (const targetId of this.#activation) last = targetId;
    if (last === undefined) throw serverError('browser_no_tab');
    return last;
  }

  /** The active tab's URL, read from Chromium now (not from the last event). */
  async currentUrl(): Promise<string> {
    for (;;) {
      const targetId = this.#activeTab();
      try {
        const { targetInfo } = await this.cdp.send<{ targetInfo: TargetInfo }>(
          'Target.getTargetInfo',
          { targetId },
        );
        return targetInfo.url;
      } catch (err) {
        if (this.#activation.has(targetId) || !this.cdp.isOpen) throw err;
        // it closed meanwhile: ask about the tab that is active now
      }
    }
  }

  /** The active tab with this server's own flattened CDP session attached to it. */
  async activePage(): Promise<{ cdp: CdpConnection; sessionId: string; targetId: string }> {
    const targetId = this.#activeTab();
    return { cdp: this.cdp, sessionId: await this.attach(targetId), targetId };
  }

  /**
   * PNG of the active tab's viewport, at the instance's resolution (`windowSize`). A `cdp_url`
   * client may set the tab's size (`Emulation.setDeviceMetricsOverride` 3700×3700 of noise made
   * a 55 MB answer, seconds of the server's main thread): the capture is clipped to the
   * resolution, from where the visible viewport is (a clip is in page coordinates), which
   * Chromium renders at that size whatever the emulated size and scale factor.
   */
  async screenshot(): Promise<Buffer> {
    const { sessionId } = await this.activePage();
    const [width, height] = this.#opts.windowSize;
    const { cssVisualViewport: view } = await this.cdp.send<{
      cssVisualViewport?: { pageX?: unknown; pageY?: unknown };
    }>('Page.getLayoutMetrics', {}, sessionId);
    const at = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    const { data } = await this.cdp.send<{ data: string }>(
      'Page.captureScreenshot',
      {
        format: 'png',
        clip: { x: at(view?.pageX), y: at(view?.pageY), width, height, scale: 1 },
      },
      sessionId,
      30_000,
    );
    if (typeof data !== 'string') throw new CdpError('Page.captureScreenshot', 'no image data');
    // decoding the reply took this turn of the event loop (a noisy 1024×768 is 3 MB of base64):
    // the image's own decoding waits for the next, so that others are served in between
    await nextTurn();
    const png = Buffer.from(data, 'base64');
    const [w, h] = pngSize(png);
    if (w !== width || h !== height) {
      throw new CdpError('Page.captureScreenshot', `an image of ${w}×${h}, not ${width}×${height}`);
    }
    return png;
  }

  captureAuth(maxBytes: number): Promise<BrowserAuthData> {
    return captureAuth(this, maxBytes);
  }

  async applyAuth(data: BrowserAuthData): Promise<void> {
    await applyAuth(this, data);
    for (const origin of authOrigins(data)) this.#origins.add(origin);
  }

  /** Relay a client WebSocket (token already checked) to this browser's DevTools. */
  upgrade(rest: string, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.#relay.handle(rest, req, socket, head);
  }

  /** SIGSTOP every process of this Chromium, until all are stopped. */
  freeze(): Promise<void> {
    this.frozen(true);
    return this.#chromium.freeze();
  }

  /** Paused, or resumed: a paused browser's silence is not deafness (inbound.ts). */
  frozen(on: boolean): void {
    this.#mux.freeze(on);
  }

  /** SIGCONT every process of this Chromium. */
  thaw(): void {
    this.#chromium.signal('SIGCONT');
    this.frozen(false);
  }

  /**
   * Close every relay, then TERM (and if need be KILL) Chromium's group and wait. Idempotent.
   * `flush`: first ask Chromium to exit by itself (`Browser.close`) and give it `FLUSH_MS` to, so
   * that what it keeps in memory reaches its profile directory: it writes its cookie store only
   * every 30 s and at a clean exit, and a profile saved from a killed Chromium lost the cookies
   * of its last half minute.
   */
  close({ flush = false }: { flush?: boolean } = {}): Promise<void> {
    return (this.#closing ??= (async () => {
      this.#relay.closeAll();
      if (flush) {
        this.cdp.send('Browser.close').catch(() => {}); // its answer may not come: it exits
        await raceDeadline(this.#chromium.process.exited, FLUSH_MS, { unref: true });
      }
      this.cdp.close('the browser was stopped');
      await this.#chromium.kill();
    })());
  }
}
