/**
 * Sidecars: long-lived helper processes of burrow's own that the server runs inside an
 * instance's sandbox and talks to over their stdin and stdout: the toolbox
 * (../toolbox/toolbox.ts) and the Jupyter kernel bridge (../ubuntu/kernels/pool.ts). Each speaks
 * its own protocol; what running such a process takes is written here once:
 *
 * - **Start.** Through the sandbox's spawn (`SandboxSpawn`), so it is a process of the instance
 *   like any other; its program is written on stdin first (`boot`), so nothing of the package
 *   needs to be visible inside.
 * - **Reading.** stdout goes to the protocol chunk by chunk. The process is the instance's (any
 *   process of the instance may rewrite its memory or hold a copy of its pipes), so a chunk the
 *   protocol refuses kills it, and nothing is read from it after that or after its failure.
 * - **Failure.** The first reason it can no longer answer (it exited, broke the protocol, missed
 *   a deadline, was stopped) is kept and handed to the protocol once, so that every call in
 *   flight fails with it. The last characters of its stderr (bounded) go into the exit message.
 * - **Deadlines.** `within` waits for something of it at most so long; past that it is killed.
 * - **End.** `close`: a last message if the protocol has one, EOF on stdin, a grace to exit on
 *   its own, then its process group is terminated (TERM, then KILL).
 * - **Restart.** `Sidecar` holds the current process: it starts one on first use, a new one
 *   when the last has failed (its stragglers killed first), numbers them (`generation`), and
 *   starts none once stopped.
 */
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import type { Logger } from '../../internal/log.js';
import type { ExitInfo, Supervised } from '../../internal/process.js';
import type { SandboxSpawn } from './sandbox.js';

/** How a sidecar stopped answering. */
export type SidecarFailure =
  /** The process exited (or could not be executed). */
  | 'exited'
  /** It wrote something its protocol does not allow; it was killed. */
  | 'broken'
  /** It missed a deadline; it was killed. */
  | 'timeout'
  /** The server ended it. */
  | 'stopped';

/** What to run, and how its failures are told. */
export interface SidecarSpec {
  /** Names the process in messages and logs, e.g. `the toolbox`. */
  name: string;
  spawn: SandboxSpawn;
  argv: readonly string[];
  /** Its complete environment. */
  env: Record<string, string>;
  /** Working directory, as a sandbox path. */
  cwd: string;
  /** Written to stdin before anything else (the program's source). */
  boot: readonly (string | Uint8Array)[];
  /** Characters of stderr kept for error messages. */
  stderrChars: number;
  /** Every chunk of stderr as it comes (a debug log, say). */
  onStderr?: (text: string) => void;
  /** The error for a failure of `kind`; `message` says what happened. Default a plain Error. */
  error?: (kind: SidecarFailure, message: string) => Error;
  log?: Logger | undefined;
}

/** The protocol's side of one process. */
export interface SidecarProtocol {
  /** A chunk of stdout (never after a failure). Returns why it breaks the protocol, if it does. */
  read(chunk: Buffer): string | undefined;
  /** The process can no longer answer: called once, with the first reason. */
  failed(err: Error): void;
}

/** One sidecar process. */
export class SidecarProcess {
  readonly proc: Supervised;
  readonly #spec: SidecarSpec;
  readonly #protocol: SidecarProtocol;
  #failure: Error | undefined;
  #stderr = '';

  /** Start it (throws what the spawn throws, e.g. a sandbox that is stopping) and boot it. */
  constructor(spec: SidecarSpec, protocol: SidecarProtocol) {
    this.#spec = spec;
    this.#protocol = protocol;
    const proc = spec.spawn(spec.argv, {
      env: spec.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      cwd: spec.cwd,
    });
    this.proc = proc;
    const { stdin, stdout, stderr } = proc.child;
    stdin?.on('error', () => undefined); // EPIPE after an exit: reported through `exited`
    stderr?.setEncoding('utf8');
    stderr?.on('data', (text: string) => {
      this.#stderr = (this.#stderr + text).slice(-spec.stderrChars);
      spec.onStderr?.(text);
    });
    stdout?.on('data', (chunk: Buffer) => {
      if (this.#failure) return void stdout.destroy();
      const why = protocol.read(chunk);
      if (why !== undefined) this.#broken(why);
    });
    void proc.exited.then((info) => {
      const how = info.signal ? `signal ${info.signal}` : `status ${info.code}`;
      const tail = this.stderrTail(400);
      this.fail('exited', `${spec.name} exited (${how})${tail ? `: ${tail}` : ''}`);
    });
    for (const part of spec.boot) stdin?.write(part);
  }

  /** Host pid of the process (of the first step of its spawn chain). */
  get pid(): number {
    return this.proc.pid;
  }

  /** Neither failed nor exited. */
  get running(): boolean {
    return this.#failure === undefined && this.proc.running;
  }

  /** Why it can no longer answer, once it cannot. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** The last `chars` characters of its stderr, trimmed. */
  stderrTail(chars: number): string {
    return this.#stderr.slice(-chars).trim();
  }

  /** Write to its stdin (dropped once it failed). */
  write(data: string | Uint8Array): void {
    if (this.#failure === undefined) this.proc.child.stdin?.write(data);
  }

  /**
   * Record that it can no longer answer (the first reason wins; the protocol hears it once) and
   * return that reason. Does not end the process: `kill` or `close` does.
   */
  fail(kind: SidecarFailure, message: string): Error {
    if (this.#failure === undefined) {
      this.#failure = this.#spec.error?.(kind, message) ?? new Error(message);
      this.#protocol.failed(this.#failure);
    }
    return this.#failure;
  }

  /** It broke its protocol: failed, never read again, killed at once. */
  #broken(why: string): void {
    this.#spec.log?.error(
      { pid: this.proc.pid, why },
      `${this.#spec.name} broke its protocol; killed`,
    );
    this.fail('broken', `${this.#spec.name} broke its protocol: ${why}`);
    this.proc.child.stdout?.destroy();
    void this.proc.kill(0);
  }

  /**
   * `promise`'s outcome if it settles within `ms`; otherwise the process fails with `message`
   * (kind `timeout`), is killed (TERM, then KILL after `killGraceMs`) and that failure is thrown.
   */
  async within<T>(promise: Promise<T>, ms: number, message: string, killGraceMs = 200): Promise<T> {
    const outcome = await raceDeadline(promise, ms);
    if (outcome !== TIMED_OUT) return outcome;
    const err = this.fail('timeout', message);
    void this.proc.kill(killGraceMs);
    throw err;
  }

  /** Terminate its process group now: TERM, then KILL after `graceMs`. */
  kill(graceMs: number): Promise<ExitInfo> {
    return this.proc.kill(graceMs);
  }

  /**
   * End it gracefully, then by force: write `farewell` (if given) while it runs, close its
   * stdin, give it `graceMs` to exit on its own, then terminate its group (TERM, then KILL
   * after `killGraceMs`). Whether it fails first (`fail('stopped', …)`) is the protocol's call:
   * one that still reads the answer to its farewell fails when the process exits.
   */
  async close(opts: { graceMs: number; killGraceMs: number; farewell?: string }): Promise<void> {
    const stdin = this.proc.child.stdin;
    if (this.proc.running) {
      if (opts.farewell !== undefined) stdin?.write(opts.farewell);
      stdin?.end();
      await raceDeadline(this.proc.exited, opts.graceMs, { unref: true });
    } else {
      stdin?.end();
    }
    await this.proc.kill(opts.killGraceMs);
  }
}

/** Whatever wraps one `SidecarProcess` with its protocol. */
export interface HasSidecar {
  readonly sidecar: SidecarProcess;
}

export interface SidecarOptions<T extends HasSidecar> {
  /** Start process number `generation` (1, 2, …) and resolve once it is ready to answer. */
  start(generation: number): Promise<T>;
  /** The error `get` rejects with once stopped. */
  stopped(): Error;
  /** A new process is about to replace the last one (its state, e.g. its kernels, is lost). */
  onReplace?: () => void;
}

/**
 * The current process of a sidecar: started on first use, replaced when it has failed, none
 * after `stop`. Callers that ask while one is starting share that start.
 */
export class Sidecar<T extends HasSidecar> {
  readonly #opts: SidecarOptions<T>;
  #current: Promise<T> | undefined;
  /** The current process once it started. */
  #ready: T | undefined;
  #generation = 0;
  #stopping: Promise<void> | undefined;

  constructor(opts: SidecarOptions<T>) {
    this.#opts = opts;
  }

  /** The running process, started (again) when there is none. */
  get(): Promise<T> {
    if (this.#stopping) return Promise.reject(this.#opts.stopped());
    const current = this.#current;
    if (!current) return this.#replace(undefined);
    return current.then(
      (t) => (t.sidecar.running ? t : this.#replace(current)),
      () => this.#replace(current),
    );
  }

  #replace(previous: Promise<T> | undefined): Promise<T> {
    if (this.#current !== previous) return this.get(); // someone else replaced it
    if (this.#stopping) return Promise.reject(this.#opts.stopped());
    if (previous) this.#opts.onReplace?.();
    this.#ready = undefined;
    const generation = ++this.#generation;
    const next = (async () => {
      // stragglers of the last one's group (nothing when it exited: its group went with it)
      const last = await previous?.catch(() => undefined);
      await last?.sidecar.kill(0);
      return this.#opts.start(generation);
    })();
    // registered first, so set before any caller of `get` sees the process
    void next.then(
      (t) => {
        if (this.#current === next) this.#ready = t;
      },
      () => undefined,
    );
    this.#current = next;
    return next;
  }

  /** The process if it runs now (none is started). */
  get running(): T | undefined {
    return this.#ready?.sidecar.running ? this.#ready : undefined;
  }

  /** The current process once its start has settled, if it runs (none is started). */
  async settled(): Promise<T | undefined> {
    const t = await this.#current?.catch(() => undefined);
    return t?.sidecar.running ? t : undefined;
  }

  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /** Start nothing more, and end the current process with `end`. Idempotent. */
  stop(end: (t: T) => Promise<void>): Promise<void> {
    this.#stopping ??= (async () => {
      const t = await this.#current?.catch(() => undefined);
      if (t) await end(t);
    })();
    return this.#stopping;
  }
}
