/**
 * Process supervision (docs/architecture.md): every child in its own process group, tied to the
 * server's life with PR_SET_PDEATHSIG (via `setpriv`), stopped as a group (TERM, then KILL), and
 * awaited.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { backgroundChild } from './background.js';
import { raceDeadline, TIMED_OUT, until } from './deadline.js';

export const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SuperviseOptions extends Omit<SpawnOptions, 'detached'> {
  /** Skip the `setpriv --pdeathsig SIGKILL` wrapper (for a process tied to the server otherwise). */
  noDeathSignal?: boolean;
}

/** A child process in its own process group that dies with this process. */
export class Supervised {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exited: Promise<ExitInfo>;
  #exit: ExitInfo | undefined;

  constructor(command: string, args: readonly string[], options: SuperviseOptions = {}) {
    const { noDeathSignal, ...spawnOptions } = options;
    const [cmd, argv] =
      SETPRIV && !noDeathSignal
        ? [SETPRIV, ['--pdeathsig', 'SIGKILL', '--', command, ...args]]
        : [command, [...args]];
    this.child = spawn(cmd, argv, { ...spawnOptions, detached: true });
    backgroundChild(this.child); // an embedded server's children never hold the process alone
    if (this.child.pid === undefined) {
      // spawn failed synchronously (ENOENT comes as an 'error' event); keep a rejected-safe shape
      this.pid = -1;
    } else {
      this.pid = this.child.pid;
    }
    this.exited = new Promise<ExitInfo>((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
      this.child.once('error', () => {
        this.#exit ??= { code: null, signal: null };
        resolve(this.#exit);
      });
    });
  }

  get running(): boolean {
    return this.#exit === undefined && this.pid > 0;
  }

  /**
   * Signal the whole process group, while the leader has not been reaped: once it has, its
   * number (and so the group's) may belong to a new process, of another instance say.
   */
  signalGroup(signal: NodeJS.Signals): void {
    if (this.#exit === undefined) this.#signalGroup(signal);
  }

  #signalGroup(signal: NodeJS.Signals): void {
    if (this.pid > 0) signalQuietly(-this.pid, signal);
  }

  /**
   * TERM the group, wait up to `graceMs`, then KILL it; resolves when the leader has exited. A
   * process that has exited already is left alone.
   */
  async kill(graceMs = 2000): Promise<ExitInfo> {
    if (this.pid <= 0 || this.#exit !== undefined) return this.exited;
    this.signalGroup('SIGCONT'); // a paused group cannot act on TERM
    this.signalGroup('SIGTERM');
    const exited = await raceDeadline(this.exited, graceMs, { unref: true });
    if (exited === TIMED_OUT) this.signalGroup('SIGKILL');
    const info = await this.exited;
    // stragglers left in the group, right as the leader is reaped: while the group has members
    // its number cannot be handed to another process
    this.#signalGroup('SIGKILL');
    return info;
  }
}

/**
 * All live descendants of `pid` (children, grandchildren, …), read from /proc; of several roots
 * at once, in one reading of /proc (each scan reads every process's `stat`).
 */
export function descendants(pid: number | readonly number[]): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = parentOf(Number(entry));
    if (ppid === 0) continue; // exited while we looked (or a kernel thread)
    const list = children.get(ppid) ?? [];
    list.push(Number(entry));
    children.set(ppid, list);
  }
  const out: number[] = [];
  const queue = typeof pid === 'number' ? [pid] : [...pid];
  while (queue.length > 0) {
    const p = queue.shift()!;
    for (const c of children.get(p) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/**
 * A process as it was when seen: its number and its start time. A number is handed to a new
 * process (or thread) as soon as the old one is reaped and the kernel's cursor comes round, which
 * on a busy machine (Chromium starts hundreds of threads, `pid_max` may be 32768) can be
 * milliseconds later; a signal meant for a process seen earlier goes through `signalProcess`,
 * which checks that the number still names the same process.
 */
export interface ProcessRef {
  readonly pid: number;
  /** Field 22 of /proc/<pid>/stat: clock ticks after boot. */
  readonly start: string;
}

/** `pid` as it is now, or undefined when it is gone. */
export function processRef(pid: number): ProcessRef | undefined {
  const stat = statFields(pid);
  return stat ? { pid, start: stat[19]! } : undefined;
}

/** Whether `ref` is still that process and not a zombie. */
export function stillRunning(ref: ProcessRef): boolean {
  const stat = statFields(ref.pid);
  return stat !== undefined && stat[19] === ref.start && stat[0] !== 'Z';
}

/**
 * Whether `ref` has been reaped: its number names no process, or another one. A zombie is not
 * reaped yet (its parent has not waited for it).
 */
export function reaped(ref: ProcessRef): boolean {
  return statFields(ref.pid)?.[19] !== ref.start;
}

/** Signal `ref` if its number still names that process. */
export function signalProcess(ref: ProcessRef, signal: NodeJS.Signals): void {
  if (stillRunning(ref)) signalQuietly(ref.pid, signal);
}

/** The fields of /proc/<pid>/stat after `(comm)`, from the state (field 3) on. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** The parent of process `pid` as this process sees it, or 0 once it is gone. */
export function parentOf(pid: number): number {
  return Number(statFields(pid)?.[1] ?? 0);
}

/** The scheduler state letter of `pid` (`R`, `S`, `T` …), or '' when it is gone. */
export function processState(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2);
  } catch {
    return '';
  }
}

/**
 * Whether a process numbered `pid` is alive: `kill(pid, 0)` finds it and /proc does not show it
 * a zombie (exited, not yet reaped; 'X' likewise). EPERM means the process exists but belongs to
 * someone else (another user, another user namespace): alive. Without /proc, `kill` alone
 * answers. Not a positive integer: false. A number says nothing of which process it is: to
 * follow one process over time, use a `ProcessRef`.
 */
export function pidAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false; // ESRCH: no such process
  }
  const state = processState(pid);
  return state !== 'Z' && state !== 'X';
}

/** `pidAlive` by the name the tests know it by. */
export const alive = pidAlive;

/**
 * Sends `signal` to `pid` (a negative number: to that process group), not minding a process
 * that is gone: true when the signal was delivered, false when no such process exists (ESRCH) or
 * it is not ours to signal (EPERM: the number now names another user's process). Other errors (an
 * unknown signal) are thrown.
 */
export function signalQuietly(pid: number, signal: NodeJS.Signals | number): boolean {
  try {
    return process.kill(pid, signal);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ESRCH' || code === 'EPERM') return false;
    throw err;
  }
}

/**
 * SIGSTOPs the processes `list()` names until /proc shows every one of them stopped: a process
 * forked while the first signals went out is caught on the next round. Best effort within
 * `deadlineMs`; returns the pids still not stopped (normally none).
 */
export async function freezeAll(list: () => number[], deadlineMs = 2000): Promise<number[]> {
  let running: number[] = [];
  await until(
    () => {
      running = list().filter((pid) => !['T', 't', 'Z', 'X', ''].includes(processState(pid)));
      for (const pid of running) signalQuietly(pid, 'SIGSTOP');
      return running.length === 0;
    },
    { timeoutMs: deadlineMs, intervalMs: 10 },
  );
  return running;
}
