/**
 * The skeleton of a fresh Chromium profile, made once per server run and written into every
 * sandbox made ahead (sandbox/stock.ts), so that an instance's Chromium opens its stores instead
 * of creating them on its start's path.
 *
 * A Chromium given an empty `--user-data-dir` creates about 70 files in its first second: SQLite
 * databases (cookies, history, logins, web data, favicons, trust tokens, ...), LevelDB stores
 * (local storage, site characteristics, extension state, ...) and code-cache indexes, each a
 * schema written and synced while the first tab opens and loads. On bare Chromium with burrow's
 * flags, one tab and a first `goto` of a local page, the skeleton saved 27–45 ms of ~320 ms to
 * the page and 50–90 ms of CPU (bench/start-to-page.ts measures it through the server).
 *
 * What it may hold, since every instance of the run gets a copy:
 * - it is made by a Chromium of this server's own (same binary, same flags) in a sandbox of its
 *   own that nothing else runs in and that has no way out (no egress listens for it), shown
 *   nothing but `about:blank`, and stopped before any instance gets a copy: no instance ever
 *   writes to it, so it carries nothing from one instance to another;
 * - only `Default/`, and there only the stores: no preferences, no session files or session
 *   storage, no HTTP, GPU or shader caches, no logs or locks (`keepInTemplate`). `Local State`
 *   (with its metrics and variations state) stays out, so each instance's Chromium makes its own,
 *   as on a fresh profile.
 * - It is kept in memory, never on disk where anything could change it between copies.
 * - It is made anew when the Chromium binary changes under the running server (a package
 *   upgrade, or a downgrade): each seed compares the binary's identity (`binaryIdentity`) with
 *   the one the template was made with. A newer Chromium would migrate an older skeleton's
 *   stores on every start; an older one may refuse a newer skeleton's.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { until } from '../../internal/deadline.js';
import type { Logger } from '../../internal/log.js';
import { untraced } from '../../internal/stages.js';
import { chromiumProxyArgs, Sandbox, type SandboxHost } from '../sandbox/index.js';
import { ChromiumSession } from './session.js';

/**
 * Where Chromium's directories are in an instance's home (profile, tmp, home): a browser
 * instance's and the ubuntu desktop's alike, so the skeleton in a sandbox made ahead serves both.
 */
export const CHROMIUM_DIR = '.config/burrow-chromium';
/** The profile directory, relative to the instance's home. */
export const PROFILE_DIR = `${CHROMIUM_DIR}/profile`;
/** The directories Chromium's launch needs there (chromium.ts), relative to the home. */
export const CHROMIUM_DIRS = ['profile', 'tmp', 'home'].map((d) => `${CHROMIUM_DIR}/${d}`);

/**
 * How long the template's Chromium runs after its first tab: until its profile's list of files
 * has not changed for `QUIET_MS`, at least `MIN_SETTLE_MS` and at most `MAX_SETTLE_MS`. Chromium
 * makes its stores within ~300 ms of its start on an idle machine, then nothing until a second
 * wave ~3 s later (autofill, DIPS, predictors: not on a start's path, and left to each instance).
 */
const MIN_SETTLE_MS = 500;
const QUIET_MS = 400;
const MAX_SETTLE_MS = 3000;
/** How often the profile's list of files is read meanwhile. */
const POLL_MS = 100;
/** A skeleton is ~0.8 MB; anything far larger is not one. */
const MAX_TEMPLATE_BYTES = 32 * 2 ** 20;

/** A file (with `data`) or directory of the template, relative to the profile directory. */
export interface TemplateEntry {
  readonly path: string;
  readonly data?: Buffer | undefined;
}

/** Names under `Default/` that never go into the template, at any depth. */
const LEFT_OUT = new Set([
  'Preferences',
  'Secure Preferences',
  'Sessions',
  'Sessions_Encrypted',
  // deleted and made anew at every start that does not restore a session
  'Session Storage',
  'Current Session',
  'Current Tabs',
  'Last Session',
  'Last Tabs',
  // the HTTP cache: a directory without its index (Chromium writes it late) makes the first
  // request rebuild it, slower than no directory at all (measured: 82 against 72 ms to a first page)
  'Cache',
  'GPUCache',
  'DawnGraphiteCache',
  'DawnWebGPUCache',
  'GrShaderCache',
  'ShaderCache',
  'LOG',
  'LOG.old',
  'LOCK',
]);

/**
 * Whether a path of a fresh profile (relative to the user data directory) belongs in the
 * template: under `Default/`, none of its parts left out, no SQLite journal (empty between
 * transactions) and nothing Chromium's singleton owns.
 */
export function keepInTemplate(path: string): boolean {
  const parts = path.split('/');
  if (parts[0] !== 'Default' || parts.length < 2) return false;
  return parts.every(
    (p) => !LEFT_OUT.has(p) && !p.endsWith('-journal') && !p.startsWith('Singleton'),
  );
}

export interface ProfileTemplateOptions {
  host: SandboxHost;
  /** A fresh instance id: the template's sandbox is named like an instance's, for the sweeps. */
  mint(): string;
  /** The instance directory of `name` (made here, removed with the template's sandbox). */
  dirOf(name: string): string;
  chromiumPath: string;
  /** The operator's flags, after burrow's own, as every instance's Chromium gets them. */
  chromiumFlags: readonly string[];
  /** The template's window: the size instances start at by default. */
  windowSize: readonly [number, number];
  log: Logger;
  /**
   * What tells the Chromium binary of now from the one a template was made with; by default
   * `binaryIdentity(chromiumPath)`. Rejects when the binary cannot be read.
   */
  identity?: () => Promise<string>;
}

/**
 * The identity of the file at `path` (followed through links): a package's new version is a new
 * file (another inode), with another size or time.
 */
export async function binaryIdentity(path: string): Promise<string> {
  const st = await stat(path);
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
}

export class ProfileTemplate {
  readonly #opts: ProfileTemplateOptions;
  readonly #identity: () => Promise<string>;
  /** The template of the Chromium binary `identity`, made or being made. */
  #made: { identity: string; entries: Promise<TemplateEntry[] | undefined> } | undefined;
  #closed = false;

  constructor(opts: ProfileTemplateOptions) {
    this.#opts = opts;
    this.#identity = opts.identity ?? (() => binaryIdentity(opts.chromiumPath));
  }

  /**
   * The template's entries for the Chromium binary there is now, made on the first call and
   * again after the binary changed; undefined when it could not be made (logged once per binary:
   * instances then start on an empty profile, as without a template) or the binary cannot be read.
   */
  async #entries(): Promise<TemplateEntry[] | undefined> {
    if (this.#closed) return undefined;
    let identity: string;
    try {
      identity = await this.#identity();
    } catch {
      return undefined; // no Chromium to make it with (nor to start an instance's)
    }
    if (this.#closed) return undefined;
    if (this.#made?.identity !== identity) {
      if (this.#made) {
        this.#opts.log.info(
          'the Chromium binary changed since its profile template was made: making it anew',
        );
      }
      this.#made = { identity, entries: untraced(() => this.#makeOrWarn()) };
    }
    return this.#made.entries;
  }

  #makeOrWarn(): Promise<TemplateEntry[] | undefined> {
    return this.#make().catch((err: unknown) => {
      if (this.#closed) return undefined;
      this.#opts.log.warn(
        { err },
        'no Chromium profile template: instances start on an empty profile',
      );
      return undefined;
    });
  }

  /**
   * No template after this; one being made is cut short (its Chromium stopped at once), so that
   * a server closing just after its start does not wait for it.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#made?.entries;
  }

  /** Write the template into `sandbox`'s profile directory (nothing may have run there yet). */
  async seed(sandbox: Sandbox): Promise<void> {
    const entries = await this.#entries();
    if (entries) await sandbox.seedFiles(PROFILE_DIR, entries);
  }

  async #make(): Promise<TemplateEntry[]> {
    const { host, log } = this.#opts;
    const name = this.#opts.mint();
    const dir = this.#opts.dirOf(name);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    let sandbox: Sandbox | undefined;
    try {
      sandbox = await Sandbox.create(host, { dir, name, log, background: true });
      const box = sandbox;
      if (this.#closed) throw new Error('closed');
      await box.seedHome(CHROMIUM_DIRS);
      const session = await ChromiumSession.launch({
        executablePath: this.#opts.chromiumPath,
        operatorFlags: this.#opts.chromiumFlags,
        dir: join(box.hostHome, CHROMIUM_DIR),
        processDir: posix.join(box.home, CHROMIUM_DIR),
        members: () => box.pids(),
        spawn: (argv, o) => box.spawn(argv, o),
        mkdir: async (paths) => {
          if (!box.seeded(paths)) throw new Error(`not made ahead: ${paths.join(', ')}`);
        },
        windowSize: this.#opts.windowSize,
        // the egress's port, where nothing listens: every request fails at once
        args: chromiumProxyArgs(true),
        relayUrl: 'ws://127.0.0.1/unused',
        token: randomBytes(16).toString('hex'),
        log,
        onExit: () => {},
      });
      await settled(join(box.hostHome, PROFILE_DIR), () => this.#closed);
      await session.close({ flush: !this.#closed });
      if (this.#closed) throw new Error('closed');
      const tree = await box.readTree(PROFILE_DIR, MAX_TEMPLATE_BYTES);
      const kept = tree.filter((e) => keepInTemplate(e.path));
      if (!kept.some((e) => e.data)) throw new Error('Chromium wrote no profile');
      log.debug(
        {
          files: kept.filter((e) => e.data).length,
          bytes: kept.reduce((n, e) => n + (e.data?.length ?? 0), 0),
        },
        'Chromium profile template made',
      );
      return kept;
    } finally {
      await sandbox?.stop();
      await rm(dir, { recursive: true, force: true }).catch(() => {});
    }
  }
}

/**
 * Resolves once the file list under `dir` has been still for `QUIET_MS` (see `MAX_SETTLE_MS`), or
 * at once when `cancelled`.
 */
async function settled(dir: string, cancelled: () => boolean): Promise<void> {
  const began = Date.now();
  let last = '';
  let since = began;
  await until(
    async () => {
      if (cancelled()) return true;
      const names = (await readdir(dir, { recursive: true })).sort().join('\n');
      if (names !== last) {
        last = names;
        since = Date.now();
        return false;
      }
      return Date.now() - since >= QUIET_MS && Date.now() - began >= MIN_SETTLE_MS;
    },
    { timeoutMs: MAX_SETTLE_MS, intervalMs: POLL_MS },
  );
}
