/**
 * The instance's sandbox: its directory layout, the bubblewrap arguments that build its view of
 * the host, and every process started in it (spawn, pause, resume, stop). See ISOLATION.md.
 *
 * Layout of the instance directory `<dir>`:
 *   <dir>/home  → /home/user in the sandbox (HOME, base of relative paths), writable
 *   <dir>/tmp   → /tmp in the sandbox, writable
 *   <dir>/run   → server-only files (X authority copy for host-side X clients); not visible inside
 */
import { spawn as spawnChild, type StdioOptions } from 'node:child_process';
import { closeSync, existsSync, openSync, realpathSync } from 'node:fs';
import { chmod, mkdir, realpath } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import {
  descendants,
  freezeAll,
  alive,
  Supervised,
  type ExitInfo,
} from '../../internal/process.js';
import type { Logger } from '../runtime.js';
import { isUnder, SandboxView, type ViewLayout } from './paths.js';

/** Where the home directory appears inside a bubblewrap sandbox. */
export const SANDBOX_HOME = '/home/user';
/** PATH inside the sandbox. */
export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const BWRAP = [process.env.BURROW_BWRAP, '/usr/bin/bwrap', '/bin/bwrap'].find(
  (p): p is string => !!p && existsSync(p),
);
/** Host directories every sandbox hides (empty tmpfs inside): secrets and host sockets. */
const MASKED = ['/root', '/home', '/run'];
/** Paths the server-side file tools never serve (the sandbox has its own /proc and /dev). */
const NOT_SERVED = ['/proc', '/sys', '/dev'];

export type SandboxMode =
  /** bubblewrap, one pid namespace for the whole instance (needs root for joining it). */
  | 'bwrap'
  /** bubblewrap, one pid namespace per spawned process (unprivileged server). */
  | 'bwrap-per-process'
  /** No bubblewrap: plain processes with HOME and TMPDIR in the instance directory. */
  | 'none';

export interface SandboxOptions {
  /** The instance directory (created by the registry). */
  dir: string;
  /** Host directories to hide from the sandbox, e.g. the server's data dir. */
  mask: readonly string[];
  /** `auto` (default): bubblewrap when it works, else `none`. Env `BURROW_SANDBOX=none` forces none. */
  isolation?: 'auto' | 'bwrap' | 'none';
  log: Logger;
  /** A process of the sandbox's own (anchor) died on its own. */
  onCrash?: (reason: string) => void;
}

export interface SpawnOptions {
  env: Record<string, string>;
  /** stdio of the process; fd numbers ≥ 3 pass through bubblewrap unchanged. Default all ignored. */
  stdio?: StdioOptions;
  /** Working directory as a sandbox path; default home. */
  cwd?: string;
}

export interface ExecResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
}

let bwrapWorks: Promise<boolean> | undefined;
/** Whether bubblewrap can build a sandbox here (user namespaces may be disabled). Cached. */
function probeBwrap(): Promise<boolean> {
  if (!BWRAP) return Promise.resolve(false);
  bwrapWorks ??= new Promise<boolean>((resolve) => {
    const child = spawnChild(
      BWRAP,
      [
        '--ro-bind',
        '/',
        '/',
        '--unshare-pid',
        '--die-with-parent',
        '--cap-drop',
        'ALL',
        '--',
        '/bin/true',
      ],
      { stdio: 'ignore' },
    );
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
  return bwrapWorks;
}

export class Sandbox {
  readonly mode: SandboxMode;
  readonly view: SandboxView;
  /** HOME as seen by processes in the sandbox. */
  readonly home: string;
  /** /tmp (bubblewrap) or `<dir>/tmp` (no bubblewrap) as seen by processes in the sandbox. */
  readonly tmp: string;
  readonly hostHome: string;
  readonly hostTmp: string;
  /** Server-only directory of the instance (not visible in the sandbox). */
  readonly hostRun: string;
  readonly #bwrapArgs: string[];
  readonly #procs = new Set<Supervised>();
  readonly #onCrash: ((reason: string) => void) | undefined;
  #pidnsFd: number | undefined;
  #stopping: Promise<void> | undefined;

  private constructor(mode: SandboxMode, dir: string, mask: string[], opts: SandboxOptions) {
    this.mode = mode;
    this.#onCrash = opts.onCrash;
    this.hostHome = join(dir, 'home');
    this.hostTmp = join(dir, 'tmp');
    this.hostRun = join(dir, 'run');
    const bwrap = mode !== 'none';
    this.home = bwrap ? SANDBOX_HOME : this.hostHome;
    this.tmp = bwrap ? '/tmp' : this.hostTmp;
    const layout: ViewLayout = {
      home: this.home,
      binds: [
        { sandbox: this.home, host: this.hostHome },
        { sandbox: this.tmp, host: this.hostTmp },
      ],
      hidden: bwrap ? [...MASKED, ...mask, ...NOT_SERVED] : [...mask, ...NOT_SERVED],
    };
    this.view = new SandboxView(layout);
    this.#bwrapArgs = bwrap ? buildBwrapArgs(this.hostHome, this.hostTmp, mask) : [];
  }

  /** Create the directories and, with a shared pid namespace, its anchor process. */
  static async create(opts: SandboxOptions): Promise<Sandbox> {
    const dir = await realpath(opts.dir);
    await mkdir(join(dir, 'home'), { recursive: true });
    await mkdir(join(dir, 'tmp'), { recursive: true });
    await mkdir(join(dir, 'run'), { recursive: true, mode: 0o700 });
    await chmod(join(dir, 'tmp'), 0o1777);
    const wanted = process.env.BURROW_SANDBOX === 'none' ? 'none' : (opts.isolation ?? 'auto');
    let mode: SandboxMode = 'none';
    if (wanted !== 'none') {
      if (await probeBwrap()) mode = process.getuid?.() === 0 ? 'bwrap' : 'bwrap-per-process';
      else if (wanted === 'bwrap')
        throw new Error('bubblewrap is not available or cannot create a sandbox here');
      else
        opts.log.warn('bubblewrap unavailable: ubuntu instance runs without filesystem isolation');
    }
    // hide the data dir (other instances, auth states); /tmp and the masked dirs are hidden anyway
    const mask = opts.mask
      .filter((m) => existsSync(m))
      .map((m) => realpathSync(m))
      .filter((m) => m !== '/')
      .filter((m) => mode === 'none' || ![...MASKED, '/tmp'].some((c) => isUnder(m, c)));
    const sandbox = new Sandbox(mode, dir, [...new Set(mask)], opts);
    if (mode === 'bwrap') await sandbox.#startAnchor();
    return sandbox;
  }

  /** The view of paths (home, writable binds, hidden paths) the file tools apply. */
  get layout(): ViewLayout {
    return this.view.layout;
  }

  /** Start a process inside the sandbox. It is tracked: paused, resumed and killed with it. */
  spawn(argv: readonly string[], opts: SpawnOptions): Supervised {
    if (this.#stopping) throw new Error('sandbox is stopping');
    const [cmd, ...args] = argv;
    if (!cmd) throw new Error('spawn: empty argv');
    const stdio: StdioOptions = opts.stdio ?? ['ignore', 'ignore', 'ignore'];
    const cwd = opts.cwd ?? this.home;
    let proc: Supervised;
    if (this.mode === 'none') {
      proc = new Supervised(cmd, args, { env: opts.env, cwd, stdio });
    } else {
      const list = Array.isArray(stdio) ? [...(stdio as unknown[])] : [stdio, stdio, stdio];
      const ns: string[] = [];
      if (this.#pidnsFd !== undefined) {
        ns.push('--pidns', String(list.length));
        list.push(this.#pidnsFd);
      } else {
        ns.push('--unshare-pid');
      }
      proc = this.#bwrap(
        [...this.#bwrapArgs, ...ns, '--chdir', cwd],
        [cmd, ...args],
        list,
        opts.env,
      );
    }
    this.#procs.add(proc);
    void proc.exited.then(() => this.#procs.delete(proc));
    return proc;
  }

  /** Run a command in the sandbox to completion, with a deadline and capped output. */
  async exec(
    argv: readonly string[],
    opts: { env: Record<string, string>; timeoutMs: number; maxBytes?: number; cwd?: string },
  ): Promise<ExecResult> {
    const spawnOpts: SpawnOptions = { env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] };
    if (opts.cwd !== undefined) spawnOpts.cwd = opts.cwd;
    const proc = this.spawn(argv, spawnOpts);
    const max = opts.maxBytes ?? 1 << 20;
    const collect = (stream: Readable | null) => {
      const chunks: Buffer[] = [];
      let size = 0;
      stream?.on('data', (c: Buffer) => {
        if (size < max) chunks.push(c.subarray(0, max - size));
        size += c.length;
      });
      return () => Buffer.concat(chunks);
    };
    const out = collect(proc.child.stdout);
    const err = collect(proc.child.stderr);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void proc.kill(500);
    }, opts.timeoutMs);
    const info = await proc.exited;
    clearTimeout(timer);
    await streamsClosed(proc);
    return { code: info.code, signal: info.signal, stdout: out(), stderr: err(), timedOut };
  }

  /** Every live process of the instance, parents before children (host pids). */
  pids(): number[] {
    const out: number[] = [];
    for (const p of this.#procs) {
      if (p.pid > 0 && p.running) out.push(p.pid, ...descendants(p.pid));
    }
    return out;
  }

  /** SIGSTOP every process, until /proc shows all stopped (one may fork meanwhile). */
  async pause(): Promise<void> {
    await freezeAll(() => this.pids());
  }

  async resume(): Promise<void> {
    for (const pid of this.pids().reverse()) signal(pid, 'SIGCONT');
  }

  /** Kill every process (TERM, then KILL) and wait for them. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  /**
   * Kill one process of the sandbox with everything below it. The processes inside die first
   * (SIGKILL), so their bwrap reaps them and exits on its own: killing bwrap first would leave
   * them as zombies for the host's init to reap, and a pid namespace cannot finish dying while it
   * holds zombies (a container whose pid 1 never reaps would hang `stop`).
   */
  async terminate(proc: Supervised): Promise<void> {
    if (!proc.running) return;
    const below = descendants(proc.pid);
    for (const pid of [proc.pid, ...below]) signal(pid, 'SIGCONT');
    for (const pid of below) signal(pid, 'SIGKILL');
    if (this.mode !== 'none' && below.length > 0) {
      await Promise.race([proc.exited, new Promise((r) => setTimeout(r, 1000))]);
    }
    await proc.kill(200);
  }

  async #stop(): Promise<void> {
    const all = this.pids();
    await Promise.all([...this.#procs].map((p) => this.terminate(p)));
    // without bwrap, processes that left their group with setsid need a direct KILL
    for (const pid of all) signal(pid, 'SIGKILL');
    const deadline = Date.now() + 3000;
    while (all.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    if (this.#pidnsFd !== undefined) closeSync(this.#pidnsFd);
    this.#pidnsFd = undefined;
  }

  /** Whether `stop` has been called. */
  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /**
   * Run bubblewrap. Its options stay on the command line (they name the instance directory, so
   * `pgrep -f <instance dir>` finds every sandbox of an instance; inside, that path is hidden).
   */
  #bwrap(
    options: string[],
    command: string[],
    stdio: unknown[],
    env: Record<string, string>,
  ): Supervised {
    return new Supervised(BWRAP!, [...options, '--', ...command], {
      env,
      stdio: stdio as StdioOptions,
    });
  }

  /** A sleeping pid 1 of the instance's pid namespace: every later process joins it, and when it
   * dies the kernel kills everything in the namespace. */
  async #startAnchor(): Promise<void> {
    const anchor = this.#bwrap(
      [...this.#bwrapArgs, '--unshare-pid', '--info-fd', '3'],
      ['/bin/sleep', 'infinity'],
      ['ignore', 'ignore', 'pipe', 'pipe'],
      { PATH: SANDBOX_PATH },
    );
    this.#procs.add(anchor);
    let stderr = '';
    anchor.child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    const info = await new Promise<string>((resolve) => {
      let text = '';
      const pipe = anchor.child.stdio[3] as Readable | null;
      pipe?.on('data', (c: Buffer) => {
        text += c.toString();
        if (/"child-pid"\s*:\s*\d+/.test(text)) resolve(text);
      });
      void anchor.exited.then(() => resolve(text));
    });
    const childPid = /"child-pid"\s*:\s*(\d+)/.exec(info)?.[1];
    if (!childPid || !anchor.running) {
      await anchor.kill();
      throw new Error(`bubblewrap failed to start the sandbox: ${stderr.trim() || 'no child pid'}`);
    }
    this.#pidnsFd = openSync(`/proc/${childPid}/ns/pid`, 'r');
    void anchor.exited.then((e) => {
      this.#procs.delete(anchor);
      if (!this.#stopping) this.#onCrash?.(`sandbox init exited (${describeExit(e)})`);
    });
  }
}

function buildBwrapArgs(hostHome: string, hostTmp: string, mask: readonly string[]): string[] {
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc'];
  for (const m of [...MASKED, ...mask]) args.push('--tmpfs', m);
  // keep DNS working when /etc/resolv.conf points into the masked /run (systemd-resolved)
  try {
    const resolv = realpathSync('/etc/resolv.conf');
    if (isUnder(resolv, '/run'))
      args.push('--ro-bind', posix.dirname(resolv), posix.dirname(resolv));
  } catch {
    /* no resolv.conf */
  }
  args.push('--bind', hostHome, SANDBOX_HOME, '--bind', hostTmp, '/tmp');
  args.push('--die-with-parent', '--cap-drop', 'ALL');
  return args;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

export function describeExit(e: ExitInfo): string {
  return e.signal ? `signal ${e.signal}` : `status ${e.code}`;
}

/** Resolve when the child's stdout and stderr have delivered everything (after exit). */
function streamsClosed(proc: Supervised): Promise<void> {
  const wait = (s: Readable | null) =>
    s && !s.readableEnded && !s.destroyed
      ? new Promise<void>((r) => {
          s.once('close', r);
          s.once('end', r);
        })
      : Promise.resolve();
  return Promise.all([wait(proc.child.stdout), wait(proc.child.stderr)]).then(() => undefined);
}
