/**
 * Chromium launcher: one supervised process per browser, its profile and temp files under the
 * instance directory, DevTools on a pipe (`--remote-debugging-pipe`, fds 3 and 4), never on a
 * port: no other process, in this instance or outside it, can connect to them.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, readdir, symlink, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type { StdioOptions } from 'node:child_process';
import { raceDeadline, TIMED_OUT, until } from '../../internal/deadline.js';
import {
  descendants,
  freezeAll,
  processRef,
  signalProcess,
  signalQuietly,
  stillRunning,
  Supervised,
  type ExitInfo,
} from '../../internal/process.js';
import { LineDecoder } from '../../internal/lines.js';
import { stage } from '../../internal/stages.js';
import { BROWSER_STDIO, type SandboxSpawn } from '../sandbox/index.js';
import { CdpPipe } from './pipe.js';

/** Flags every Chromium gets: its network is closed, so nothing may phone home. */
export const BASE_FLAGS = [
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--test-type',
  '--force-device-scale-factor=1',
  // Chromium honours only the last --disable-features: merge, do not add another.
  // - HttpsUpgrades: http:// stays http:// (as with Playwright's own launch); auth states key
  //   storage by origin.
  // - WebUIOmniboxPopup, WebUIOmniboxAimPopup: Chromium 156 renders the address bar's popup as
  //   WebUI pages and preloads them in a renderer of their own at start, headless too (~55 MiB
  //   per idle instance, bench/density.ts); the native popup needs no renderer.
  // - NetworkTimeServiceQuerying, OptimizationHints, AimEnabled, PreconnectToSearch: requests to
  //   Google at start (a time query, hints, AI-mode checks, a search preconnect), which Playwright's
  //   own launch turns off too; each cost a name lookup in the egress while the instance's first
  //   page loads. (Debian's Chromium still asks update.googleapis.com and accounts.google.com, as
  //   under Playwright's launch: both fail at the egress, which resolves nothing for them here.)
  '--disable-features=HttpsUpgrades,WebUIOmniboxPopup,WebUIOmniboxAimPopup,NetworkTimeServiceQuerying,OptimizationHints,AimEnabled,PreconnectToSearch',
  // the network service in the browser process instead of a process of its own: ~20 MiB less
  // per idle instance (bench/density.ts); the instance's sandbox, not Chromium's process split,
  // is what keeps it from the host
  '--enable-features=NetworkServiceInProcess2',
] as const;

export interface LaunchOptions {
  /** Chromium binary, e.g. `/usr/lib/chromium/chromium` (never the `/usr/bin` wrapper). */
  executablePath: string;
  /**
   * Flags the operator adds to every Chromium (the server's `chromiumFlags`, src/server/config.ts),
   * after burrow's own (a `--disable-features` here replaces burrow's list: Chromium reads the
   * last one). Default none.
   */
  operatorFlags?: readonly string[];
  /**
   * Directory that receives `profile/`, `tmp/` (TMPDIR, through a short link in the system
   * temp dir that is removed when Chromium exits) and `home/`; created if missing.
   */
  dir: string;
  /** `--window-size`, `[width, height]` in pixels. */
  windowSize: readonly [number, number];
  /** Host names refused together with their subdomains. Default none. */
  blockedDomains?: readonly string[];
  /** Default true. A headful Chromium needs `DISPLAY` in `env`. */
  headless?: boolean;
  /** Added to the minimal environment the process gets (PATH, LANG, HOME, TMPDIR). */
  env?: Record<string, string>;
  /** Extra command-line flags, after the built-in ones. */
  args?: readonly string[];
  /** How long Chromium may take to answer on its DevTools pipe, in ms. Default 20 000. */
  startTimeoutMs?: number;
  /**
   * How the process is started, e.g. inside an ubuntu instance's sandbox. Default: a
   * `Supervised` child on the host. The hook must pass `stdio` through unchanged: fds 3 and 4
   * are the DevTools pipe, stderr feeds error messages.
   */
  spawn?: SandboxSpawn;
  /**
   * `dir` as the spawned process sees it (a sandbox that binds it elsewhere); default `dir`.
   * Chromium's flags and environment name this path.
   */
  processDir?: string;
  /**
   * Creates directories named as the process sees them (`processDir/…`), e.g. inside the sandbox
   * so that no host-side `mkdir` follows a link planted there. Default: `mkdir -p` on the host.
   */
  mkdir?: (paths: string[]) => Promise<void>;
  /** More directories to create with Chromium's own (as the process sees them), e.g. downloads. */
  extraDirs?: readonly string[];
  /**
   * The processes that may be this Chromium's strays (crashpad leaves its tree), e.g. the members
   * of the sandbox's cgroup. Required with `processDir`: the path Chromium names is then the same
   * in every instance, so only membership tells one instance's processes from another's.
   * Default: every process on the host (the instance directory in `dir` names only this one).
   */
  members?: () => number[];
}

export interface LaunchedChromium {
  readonly process: Supervised;
  /** The DevTools pipe; Chromium has answered on it. */
  readonly pipe: CdpPipe;
  /** A random id naming this browser in the public endpoint's path, `/devtools/browser/<id>`. */
  readonly browserId: string;
  /** The last lines Chromium wrote to stderr, for error messages. */
  stderrTail(): string;
  /**
   * Signal every process of this browser: its group, its descendants, and the crashpad handler,
   * which double-forks out of both but names the instance directory on its command line.
   */
  signal(signal: NodeJS.Signals): void;
  /** SIGSTOP every process, repeating until all of them are stopped (pause). */
  freeze(): Promise<void>;
  /** TERM the group, KILL it after a grace period, wait, then KILL any stray. */
  kill(): Promise<void>;
}

/** How long Chromium gets to exit on SIGTERM before it is killed. */
const KILL_GRACE_MS = 2000;

const STDERR_LINES = 20;
/** Longest stderr line kept (the rest of a longer one is dropped): the instance may write there. */
const STDERR_LINE_BYTES = 4096;

/**
 * Longest TMPDIR used as is: Chromium's singleton socket goes to
 * `<TMPDIR>/.org.chromium.Chromium.XXXXXX/SingletonSocket` (47 more bytes), under the 108-byte limit
 * of a Unix socket path with room to spare.
 */
const MAX_DIRECT_TMPDIR = 48;

export async function launchChromium(opts: LaunchOptions): Promise<LaunchedChromium> {
  const seen = opts.processDir ?? opts.dir; // the paths Chromium is told about
  const profile = join(seen, 'profile');
  const home = join(seen, 'home');
  const dirs = [profile, join(seen, 'tmp'), home, ...(opts.extraDirs ?? [])];
  await stage('chromium.dirs', async () => {
    if (opts.mkdir) await opts.mkdir(dirs);
    else await Promise.all(dirs.map((d) => mkdir(d, { recursive: true })));
  });
  // Chromium binds its singleton socket under TMPDIR, and a Unix socket path must stay under
  // 108 bytes, which deep instance directories exceed: TMPDIR is then a short link to `tmp/` in
  // the system temp dir (when Chromium runs in a sandbox, its own view is short already).
  let tmp = join(seen, 'tmp');
  let tmpLink: string | undefined;
  if (opts.processDir === undefined || tmp.length > MAX_DIRECT_TMPDIR) {
    await removeDanglingLinks();
    tmpLink = join(tmpdir(), `burrow-${randomBytes(6).toString('hex')}`);
    await symlink(join(opts.dir, 'tmp'), tmpLink);
    tmp = tmpLink;
  }

  const rules = hostResolverRules(opts.blockedDomains ?? []);
  const args = [
    ...BASE_FLAGS,
    ...(opts.headless === false ? [] : ['--headless']),
    `--user-data-dir=${profile}`,
    '--remote-debugging-pipe',
    `--window-size=${opts.windowSize[0]},${opts.windowSize[1]}`,
    ...(rules ? [`--host-resolver-rules=${rules}`] : []),
    ...(opts.args ?? []),
    ...(opts.operatorFlags ?? []),
    'about:blank',
  ];
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    TMPDIR: tmp,
    ...(process.env.LANG ? { LANG: process.env.LANG } : {}),
    ...opts.env,
  };
  // fd 3: commands to Chromium; fd 4: its replies and events
  const stdio: StdioOptions = [...BROWSER_STDIO];
  const proc = opts.spawn
    ? opts.spawn([opts.executablePath, ...args], { env, stdio })
    : new Supervised(opts.executablePath, args, { env, stdio });
  if (tmpLink) {
    const link = tmpLink;
    void proc.exited.then(() => unlink(link).catch(() => {}));
  }

  const tail: string[] = [];
  const stderrTail = () => tail.join('\n');
  const lines = new LineDecoder({ maxBytes: STDERR_LINE_BYTES, overflow: 'truncate' });
  proc.child.stderr?.on('data', (chunk: Buffer) => {
    for (const line of lines.push(chunk)) {
      if (line.includes(':ERROR:dbus/')) continue; // no D-Bus here; Chromium complains constantly
      tail.push(line);
      if (tail.length > STDERR_LINES) tail.shift();
    }
  });
  const pipe = new CdpPipe(proc.child.stdio[3] as Writable, proc.child.stdio[4] as Readable);
  const ready = answers(pipe, proc.exited);

  // The instance directory on a command line marks a process of this browser; in a sandbox
  // every instance names the same /home/user path, so only the sandbox's own members are looked
  // at. (Not the mount namespace: its number is handed to the next namespace made once this one
  // is gone, which made the stop of one instance SIGKILL the Chromium another was starting.)
  const sandboxed = opts.processDir !== undefined && opts.processDir !== opts.dir;
  if (sandboxed && !opts.members) throw new Error('launchChromium: processDir needs members');
  const needle = join(seen, '/');
  /** Every process of this Chromium: its tree, and strays that left it (crashpad). */
  const pids = () => {
    const strays = opts.members
      ? opts.members().filter((pid) => commandLineNames(pid, needle))
      : processesNaming(needle);
    return proc.running ? [...descendants(proc.pid), ...strays] : strays;
  };
  const signal = (sig: NodeJS.Signals) => {
    proc.signalGroup(sig);
    for (const pid of pids()) signalQuietly(pid, sig);
  };
  const freeze = async () => {
    proc.signalGroup('SIGSTOP');
    await freezeAll(() => (proc.running ? [proc.pid, ...pids()] : pids()));
  };
  const kill = async () => {
    // Chromium's processes as they are now: once the launched process (in a sandbox, the
    // wrapper around Chromium) exits, they are no longer its descendants, and they may still be
    // exiting; stop returns only when every one of them is gone.
    // (by start time: once reaped, their numbers may belong to another instance's processes)
    const tree = proc.running ? descendants(proc.pid).flatMap((pid) => processRef(pid) ?? []) : [];
    // Chromium first, while the wrapper that started it is there to reap it (the wrapper exits
    // with it): a process whose parent dies first goes to the host's init, outside the instance,
    // and the instance's pid 1 cannot end until that one reaps it (1–2 s of every stop seen as
    // a normal user). Only then the wrapper and whatever is left.
    if (sandboxed && tree[0]) {
      signalProcess(tree[0], 'SIGCONT'); // a stopped process cannot act on TERM
      signalProcess(tree[0], 'SIGTERM');
      await raceDeadline(proc.exited, KILL_GRACE_MS, { unref: true });
    }
    await proc.kill(KILL_GRACE_MS);
    signal('SIGKILL');
    for (const ref of tree) signalProcess(ref, 'SIGKILL');
    await until(() => !tree.some(stillRunning), { timeoutMs: 5000, intervalMs: 10 });
  };

  const timeoutMs = opts.startTimeoutMs ?? 20_000;
  const outcome = await stage('chromium.devtools', () => raceDeadline(ready, timeoutMs));
  if (outcome !== true) {
    const reason =
      outcome === TIMED_OUT ? `Chromium did not start within ${timeoutMs} ms` : outcome.message;
    pipe.close();
    await kill();
    const last = stderrTail();
    throw new Error(last ? `${reason}; last stderr lines:\n${last}` : reason);
  }
  return {
    process: proc,
    pipe,
    browserId: randomUUID(),
    stderrTail,
    signal,
    freeze,
    kill,
  };
}

/**
 * Resolves true once Chromium answers a first command on its pipe, or with how it exited if it
 * exits first (if the pipe closes first, the process's exit tells why). Chromium sends nothing unasked, and the probe's id 0 is never used
 * again (the mux counts from 1): the pipe is left with no reader, holding what comes next.
 */
function answers(pipe: CdpPipe, exited: Promise<ExitInfo>): Promise<true | Error> {
  return new Promise((resolve) => {
    pipe.listen({
      message: () => {
        pipe.listen(undefined);
        resolve(true);
      },
      close: () => {},
    });
    void exited.then((e) =>
      resolve(new Error(`Chromium exited (${e.signal ?? `code ${e.code}`})`)),
    );
    pipe.send('{"id":0,"method":"Browser.getVersion"}');
  });
}

/** TMPDIR links left by a server that was killed before its Chromium exited. */
async function removeDanglingLinks(): Promise<void> {
  for (const name of await readdir(tmpdir())) {
    const path = join(tmpdir(), name);
    if (/^burrow-[0-9a-f]{12}$/.test(name) && !existsSync(path)) await unlink(path).catch(() => {});
  }
}

/** PIDs of live processes whose command line contains `needle`. */
function processesNaming(needle: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => commandLineNames(pid, needle));
}

function commandLineNames(pid: number, needle: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle);
  } catch {
    return false; // exited while we looked
  }
}

/**
 * `--host-resolver-rules` value refusing each domain, its subdomains, and their fully qualified
 * spellings with a trailing dot (which would otherwise slip past the rules).
 */
export function hostResolverRules(domains: readonly string[]): string | undefined {
  const rules = domains
    .map(normalizeBlockedDomain)
    .flatMap((d) => [d, `*.${d}`, `${d}.`, `*.${d}.`])
    .map((pattern) => `MAP ${pattern} ~NOTFOUND`);
  return rules.length > 0 ? rules.join(', ') : undefined;
}

/** `Example.COM.` → `example.com`; throws for anything that is not a bare host name. */
export function normalizeBlockedDomain(domain: string): string {
  const host = domain
    .trim()
    .toLowerCase()
    .replace(/^\.+|\.+$/g, '');
  if (!/^[a-z0-9-]+(\.[a-z0-9-]+)*$/.test(host) || host.length > 253) {
    throw new Error(`Invalid blocked domain ${JSON.stringify(domain)}: expected a bare host name`);
  }
  return host;
}
