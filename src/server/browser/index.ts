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
  LiveViewCapability,
  RuntimeContext,
  RuntimeFactory,
} from '../instances/runtime.js';
import { InstanceMachine } from '../instances/machine.js';
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import {
  BrowserController,
  CdpComputer,
  CHROMIUM_DIRS,
  chromiumInSandbox,
  chromiumSandbox,
  liveViewUrl,
  PROFILE_DIR,
  Screencast,
  type ChromiumOptions,
} from '../chromium/index.js';
import { ffmpegIn } from '../artifacts/ffmpeg.js';
import { recordScreencast } from '../chromium/recorder.js';
import type { KeyDef } from '../computer/keys.js';
import { ComputerRunner } from '../computer/runner.js';
import { refuseUpgrade, serverError } from '../errors.js';
import { SANDBOX_PATH, type Sandbox } from '../sandbox/index.js';
import { stage } from '../../internal/stages.js';
import { BrowserFiles } from './files.js';
import { browserLiveViewPage } from './liveview-page.js';

/** Chromium's preferences in its profile directory. */
const PREFERENCES = 'Default/Preferences';
/** Read-only copies of the instance's browser extensions, one folder per id, under its home. */
const EXTENSIONS_DIR = '.burrow-extensions';

/**
 * - `browser/start` returns the running browser's `cdp_url`.
 * - `browser/stop` stops Chromium but not the instance; `browser/start` launches it again (new
 *   `cdp_url`, same profile), and until then screenshot and the other `browser/*` operations
 *   answer 400. Generic clients that stop the browser before the instance keep working.
 * - Chromium dying on its own (or through a client's `Browser.close`) puts the instance in
 *   `error`.
 */
class BrowserRuntime extends InstanceMachine {
  readonly browser: BrowserController;
  #computer: CdpComputer;
  /** Computer actions on `#computer`, one at a time. */
  #actions: ComputerRunner<KeyDef>;
  #screencast: Screencast;
  /** `upload` into the instance's home (./files.ts). */
  readonly #files: BrowserFiles;
  /** Chromium started at least once: only then is a profile written back. */
  #launched = false;

  constructor(ctx: RuntimeContext) {
    super(ctx);
    const { services } = this.ctx;
    this.#files = new BrowserFiles(() => this.created, services.maxUploadBytes, services.log);
    this.browser = new BrowserController({
      launch: () => this.#chromium(),
      onCrash: (reason) => services.failed(reason),
    });
    this.#computer = this.#newComputer(this.ctx.plan.resolution);
    this.#actions = new ComputerRunner(this.#computer);
    this.#screencast = this.#newScreencast(this.ctx.plan.resolution);
  }

  /** The sandbox is frozen meanwhile: Chromium's silence then is not deafness (chromium/inbound.ts). */
  protected override async beforePause(): Promise<void> {
    this.browser.frozen(true);
  }

  protected override async afterResume(): Promise<void> {
    this.browser.frozen(false);
  }

  #newComputer(resolution: readonly [number, number]): CdpComputer {
    return new CdpComputer({
      page: () => this.browser.activePage(),
      screenshot: () => this.browser.screenshot(),
      resolution,
    });
  }

  #newScreencast(resolution: readonly [number, number]): Screencast {
    return new Screencast({
      page: () => this.browser.activePage(),
      input: this.#computer,
      resolution,
      log: this.ctx.services.log,
    });
  }

  /**
   * A warm-pool instance gets its user: every window takes their resolution. Chromium's own
   * resolver rules (set at launch) stay empty, so the egress alone refuses blocked names; names
   * Chromium reaches without the egress (loopback ones, where the operator allows loopback) can
   * only be refused at launch, so such a request gets a fresh instance instead.
   */
  protected async adopt(req: ClaimRequest): Promise<boolean> {
    const loopbackName = (d: string) => /(^|\.)localhost\.?$/i.test(d.trim());
    if (req.blockedDomains.some(loopbackName)) return false;
    const [width, height] = req.resolution;
    const size = this.ctx.plan.resolution; // the pooled one's (the machine applies the user's after)
    if (width !== size[0] || height !== size[1]) {
      // nobody has used them yet: fresh ones start from the new size's centre
      this.#computer = this.#newComputer(req.resolution);
      this.#actions = new ComputerRunner(this.#computer);
      this.#screencast = this.#newScreencast(req.resolution);
      await this.browser.resize(width, height);
    }
    return true;
  }

  revoke(): void {
    this.browser.closeClients();
    void this.#screencast.close();
  }

  /**
   * Chromium in the instance's sandbox (chromium/in-sandbox.ts) with the instance's extensions;
   * nothing of its own listens on its loopback, so every name goes to the egress.
   */
  #chromium(): ChromiumOptions {
    const sandbox = this.created!;
    return chromiumInSandbox(this.ctx, {
      sandbox: chromiumSandbox(sandbox),
      args: extensionArgs(this.#extensionPaths(sandbox)),
      loopbackViaEgress: true,
      // a navigation the egress would refuse fails as a local Chromium's would (issue 20)
      checkNavigation: async (url) => this.egress?.checkNavigation(url),
    });
  }

  /** Where Chromium finds the instance's extensions, as it sees them. */
  #extensionPaths(sandbox: Sandbox): string[] {
    return this.ctx.plan.extensions.map((e) => posix.join(sandbox.home, EXTENSIONS_DIR, e.id));
  }

  /**
   * The extensions copied onto the fresh disk, read-only to the instance (`_metadata`, where
   * Chromium writes the indexed rules of `declarativeNetRequest`, stays writable), and Chromium's
   * preferences allowing each in every context: `browser.newContext()` makes an incognito-like
   * context, where an extension runs only if allowed there. Chromium names an unpacked extension
   * after its path, which is known before it starts.
   */
  async #seedExtensions(sandbox: Sandbox): Promise<void> {
    const list = this.ctx.plan.extensions;
    for (const e of list) {
      await sandbox
        .seedReadOnly(`${EXTENSIONS_DIR}/${e.id}`, e.dir, ['_metadata'])
        .catch((err: NodeJS.ErrnoException) => {
          if (!/^E[A-Z]+$/.test(err.code ?? '')) throw err;
          // the system's words ("ENAMETOOLONG: name too long"), not the host path after them
          const reason = err.message.split(',')[0]!;
          throw serverError('extension_unusable', { id: JSON.stringify(e.id), reason });
        });
    }
    // the saved profile's files, if any, with the extensions allowed in its preferences; they
    // replace the fresh profile's skeleton a sandbox made ahead holds (chromium/profile-template.ts)
    const restore = this.ctx.plan.profile?.restore ?? ((use) => use([]));
    await restore(async (saved) => {
      const entries = [...saved];
      if (entries.length > 0) await sandbox.emptySeeded(PROFILE_DIR);
      if (list.length > 0) {
        const at = entries.findIndex((e) => e.path === PREFERENCES && e.data);
        const prefs = parsePreferences(at >= 0 ? entries[at]!.data! : undefined);
        const ext = (prefs.extensions ??= {}) as Record<string, unknown>;
        const settings = (ext.settings ??= {}) as Record<string, Record<string, unknown>>;
        for (const p of this.#extensionPaths(sandbox)) {
          const id = unpackedExtensionId(p);
          settings[id] = { ...settings[id], incognito: true };
        }
        const data = Buffer.from(JSON.stringify(prefs));
        if (at >= 0) entries[at] = { path: PREFERENCES, data };
        else entries.push({ path: PREFERENCES, data });
      }
      if (entries.length > 0) {
        await stage('profile.seed', () => sandbox.seedFiles(PROFILE_DIR, entries));
      }
    });
  }

  /**
   * The persistent profile written back, when asked for: Chromium has exited (its files are
   * consistent) and nothing of the instance runs that could change them. A profile over its limit
   * or one that fails to save keeps its previous version; the log says why. The profile is
   * released in any case.
   */
  async #saveProfile(): Promise<void> {
    const { instance, plan, services } = this.ctx;
    const profile = plan.profile;
    if (!profile) return;
    try {
      const sandbox = this.created;
      if (!profile.save || !sandbox || !this.#launched) return;
      const skip = (name: string) => name.startsWith('Singleton');
      await profile.save((charge) =>
        sandbox.readTree(PROFILE_DIR, profile.maxBytes * 4, skip, charge).catch((err: Error) => {
          throw new Error(`profile ${profile.name} not saved: ${err.message}`);
        }),
      );
    } catch (err) {
      services.log.warn(
        { instance: instance.id, profile: profile.name, err },
        `profile ${profile.name} not saved; its previous version is kept`,
      );
      services.event?.(
        'profile_not_saved',
        `profile ${profile.name} not saved, its previous version is kept: ${(err as Error).message}`,
      );
    } finally {
      profile.release();
    }
  }

  /** Chromium's directories, so that its launch needs no process inside to make them. */
  protected override seedDirs(): string[] {
    return [...CHROMIUM_DIRS, 'Downloads', 'Recordings'];
  }

  /**
   * The recorder, then Chromium (beside the egress: Chromium goes online only once a page loads,
   * and that waits for nothing but the listener's socket, which exists already).
   */
  protected async boot(sandbox: Sandbox): Promise<void> {
    this.#recorder(sandbox);
    await this.#seedExtensions(sandbox);
    await this.browser.start();
    this.#launched = true;
  }

  protected async halt(): Promise<void> {
    await this.#screencast.close();
    // a profile written back is Chromium's files after a clean exit (its cookies included)
    await this.browser.dispose({ flush: Boolean(this.ctx.plan.profile?.save) });
    await this.#files.stop();
    await this.#saveProfile();
  }

  /** Downloads land in `~/Downloads`; recordings are the screencast through ffmpeg in the sandbox. */
  #recorder(sandbox: Sandbox): void {
    const artifacts = this.artifacts;
    if (!artifacts) return;
    const recordings = posix.join(sandbox.home, 'Recordings');
    const box = ffmpegIn(
      sandbox,
      () => ({ PATH: SANDBOX_PATH, HOME: sandbox.home }),
      sandbox.mode === 'isolated' ? [recordings] : [], // seeded on the fresh disk (seedDirs)
    );
    artifacts.setRecorder(async (file, dir) => {
      await box.mkdir(dir);
      return recordScreencast(
        {
          page: () => this.browser.activePage(),
          size: this.ctx.plan.resolution,
          ffmpeg: box.ffmpeg,
          log: this.ctx.services.log,
        },
        file,
      );
    });
  }

  /** Files into the instance's home, for `DOM.setFileInputFiles` (./files.ts). */
  get files(): FilesCapability {
    return this.#files;
  }

  /** Screenshots of the active tab, and computer actions on it through CDP `Input.*`. */
  readonly computer: ComputerCapability = {
    screenshot: async () => this.browser.screenshot(),
    run: async (action) => this.#actions.run(action),
  };

  /** The live-view page: a CDP screencast of the active tab with input (chromium/screencast.ts). */
  readonly liveView: LiveViewCapability = {
    url: async () => {
      const { instance, services } = this.ctx;
      return liveViewUrl(services.publicUrl, instance.id, instance.token);
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

/** A profile's preferences as an object; empty when absent or not a JSON object. */
function parsePreferences(data: Buffer | undefined): Record<string, unknown> {
  try {
    const v: unknown = data ? JSON.parse(data.toString('utf8')) : {};
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/** Chromium's flags loading exactly these unpacked extensions (none: no flag). */
export function extensionArgs(paths: readonly string[]): string[] {
  if (paths.length === 0) return [];
  const list = paths.join(',');
  return [`--load-extension=${list}`, `--disable-extensions-except=${list}`];
}

/**
 * The id Chromium gives an unpacked extension loaded from `path`: the first 128 bits of the
 * SHA-256 of the path, each hex digit written as a letter from `a` to `p`.
 */
export function unpackedExtensionId(path: string): string {
  const hex = createHash('sha256').update(path).digest('hex').slice(0, 32);
  return [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join('');
}
