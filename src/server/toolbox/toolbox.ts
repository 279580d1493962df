/**
 * The toolbox: one long-lived Python process (toolbox.py, stdlib only, Debian's
 * `/usr/bin/python3`) inside an instance's sandbox, which does the file operations of the edit,
 * file, upload and notebook tools. It is started like any other process of the instance (the
 * sandbox's `spawn`): as the instance's user, in its mount namespace, so the kernel resolves every
 * path in the instance's own view and applies the instance's permissions. No symlink, `..` or
 * race can take an operation outside what the instance itself can reach, and what the instance
 * cannot read, the tools cannot read.
 *
 * - The source (toolbox.py and the modules it imports) is sent on stdin (`python3 -I -c <boot>`
 *   reads it first, ../../internal/python.ts), so nothing of the package needs to be visible
 *   inside the sandbox; then stdin/stdout carry frames (frames.ts): JSON headers with binary
 *   payloads, no base64.
 * - Started on the first call; one request at a time, in call order (a serial queue); every call
 *   has a deadline, and a process that misses it is killed. A process that died is replaced by
 *   the next call, and a call that was in flight when it died is retried once on the new one.
 * - It is a process of the sandbox: paused, resumed and killed with the instance. `stop()` ends
 *   it earlier.
 *
 * Running the process (start, boot, stderr tail, deadlines, end, replacement) is the sidecar's
 * (../sandbox/sidecar.ts); this module is the toolbox's protocol on top of it.
 */
import { readFileSync } from 'node:fs';
import { pythonBoot, pythonMessage } from '../../internal/python.js';
import { SerialQueue } from '../../internal/serial.js';
import type { Logger } from '../../internal/log.js';
import type { SandboxSpawn } from '../sandbox/sandbox.js';
import { Sidecar, SidecarProcess, type SidecarFailure } from '../sandbox/sidecar.js';
import { encodeFrame, FrameDecoder, type Frame, type FrameHeader } from './frames.js';

/** Paths the tools never serve, whatever the sandbox shows there. */
export const NOT_SERVED: readonly string[] = ['/proc', '/sys', '/dev'];

export interface ToolboxOptions {
  /** Starts a process inside the instance's sandbox (`Sandbox.spawn`). */
  spawn: SandboxSpawn;
  /** The instance's home as seen inside: the toolbox's working directory, base of relative paths. */
  home: string;
  /**
   * Sandbox paths under which the tools write (a rule of the tools, for clear answers and for
   * instances without isolation; in a sandbox the kernel refuses the rest anyway). Default: no
   * rule, the kernel alone decides.
   */
  writable?: readonly string[];
  /** Sandbox paths the tools refuse to touch. Default `NOT_SERVED` (/proc, /sys, /dev). */
  hidden?: readonly string[];
  /** Interpreter. Default `/usr/bin/python3` (Debian's; the first `python3` on PATH may differ). */
  python?: string;
  /** Deadline of a call, in milliseconds, unless the call gives its own. Default 60 000. */
  timeoutMs?: number;
  log?: Logger;
}

/** An operation failed inside the sandbox: `code` is an errno name or a toolbox code. */
export class ToolboxError extends Error {
  override name = 'ToolboxError';
  constructor(
    readonly code: string,
    message: string,
    /** Which argument the failure concerns: `path`, `src` or `dst`. */
    readonly arg: string,
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

/** The toolbox process could not start, missed a deadline, or died with the call in flight. */
export class ToolboxUnavailable extends Error {
  override name = 'ToolboxUnavailable';
}

/** The process exited while a call was in flight: that call may be retried on a new one. */
class ToolboxGone extends ToolboxUnavailable {
  override name = 'ToolboxGone';
}

export interface ToolboxReply {
  header: FrameHeader;
  payload: Buffer;
  /** Which process answered (increases with every restart). */
  generation: number;
}

export interface RequestOptions {
  /** Binary data sent with the request. */
  payload?: Uint8Array;
  /** This call's deadline in milliseconds. */
  timeoutMs?: number;
  /**
   * Fail unless the process of this generation answers (state held by one process, such as an
   * upload's temp file, does not survive a restart). Such calls are never retried.
   */
  generation?: number;
}

export const DEFAULT_TIMEOUT_MS = 60_000;
const START_TIMEOUT_MS = 20_000;
const STDERR_TAIL = 8 * 1024;
const DEFAULT_PYTHON = '/usr/bin/python3';
/** Loads the modules sent first on stdin and runs toolbox.py, the last of them. */
const BOOT = pythonBoot('toolbox.py');
/** toolbox.py and the modules it imports, dependencies first. */
const MODULES = ['toolbox_fs', 'toolbox_ops', 'toolbox'] as const;

let message: Buffer | undefined;
const toolboxMessage = () =>
  (message ??= pythonMessage(
    MODULES.map((name) => ({
      name,
      source: readFileSync(new URL(`./${name}.py`, import.meta.url)),
    })),
  ));

/** The error for each way the toolbox process stops answering. */
function toolboxError(kind: SidecarFailure, message: string): Error {
  // only an exit is worth a retry: a protocol break or a missed deadline would recur
  return kind === 'exited' ? new ToolboxGone(message) : new ToolboxUnavailable(message);
}

/** One toolbox process (a sidecar, ../sandbox/sidecar.ts) and the call it is answering. */
class ToolboxProcess {
  readonly sidecar: SidecarProcess;
  readonly #decoder = new FrameDecoder();
  #waiting: { id: number; resolve(frame: Frame): void; reject(err: Error): void } | undefined;
  #nextId = 1;

  constructor(
    opts: ToolboxOptions,
    readonly generation: number,
  ) {
    const boot = toolboxMessage();
    // Any process of the instance may hold a copy of the stdout pipe's write end
    // (pidfd_getfd): it is read only while a reply is awaited, within the frame bounds, and
    // never after a violation or the exit (the sidecar stops reading then).
    this.sidecar = new SidecarProcess(
      {
        name: 'the toolbox',
        spawn: opts.spawn,
        argv: [opts.python ?? DEFAULT_PYTHON, '-I', '-c', BOOT],
        env: { HOME: opts.home, PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
        cwd: opts.home,
        boot: [boot],
        stderrChars: STDERR_TAIL,
        error: toolboxError,
        log: opts.log,
      },
      { read: (chunk) => this.#read(chunk), failed: (err) => this.#failed(err) },
    );
  }

  /** Why `chunk` breaks the protocol, if it does; else the replies it completes are delivered. */
  #read(chunk: Buffer): string | undefined {
    if (!this.#waiting) return `${chunk.length} bytes nobody asked for`;
    let frames: Frame[];
    try {
      frames = this.#decoder.push(chunk);
    } catch (err) {
      return (err as Error).message;
    }
    for (const frame of frames) {
      if (!this.#deliver(frame)) return 'a reply nobody asked for';
    }
    return undefined;
  }

  /** Send one request and wait for its reply, at most `timeoutMs` (then the process is killed). */
  async send(
    header: FrameHeader,
    payload: Uint8Array | undefined,
    timeoutMs: number,
  ): Promise<Frame> {
    const { sidecar } = this;
    if (sidecar.failure) throw sidecar.failure;
    const id = this.#nextId++;
    const reply = new Promise<Frame>((resolve, reject) => {
      this.#waiting = { id, resolve, reject };
    });
    for (const part of encodeFrame({ ...header, id }, payload)) sidecar.write(part);
    const seconds = Math.round(timeoutMs / 100) / 10;
    return sidecar.within(
      reply,
      timeoutMs,
      `the file operation did not finish within ${seconds} s`,
      200,
    );
  }

  /** Hand `frame` to the call awaiting it; false when it answers no such call. */
  #deliver(frame: Frame): boolean {
    const waiting = this.#waiting;
    if (!waiting || frame.header.id !== waiting.id) return false;
    this.#waiting = undefined;
    waiting.resolve(frame);
    return true;
  }

  #failed(err: Error): void {
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.reject(err);
  }

  /** End it: EOF on stdin (it exits on its own), then its group is killed after a grace. */
  async close(graceMs = 500): Promise<void> {
    this.sidecar.fail('stopped', 'the toolbox is stopped');
    await this.sidecar.close({ graceMs, killGraceMs: 200 });
  }
}

export class Toolbox {
  readonly #opts: ToolboxOptions;
  readonly #sidecar: Sidecar<ToolboxProcess>;
  readonly #queue = new SerialQueue();

  constructor(opts: ToolboxOptions) {
    this.#opts = opts;
    this.#sidecar = new Sidecar({
      start: (generation) => this.#start(generation),
      stopped: () => new ToolboxUnavailable('the toolbox is stopped'),
    });
  }

  /** The instance's home as seen inside (base of relative paths). */
  get home(): string {
    return this.#opts.home;
  }

  /**
   * Run `op` with `fields` (and a payload) in the toolbox, after the calls queued before it.
   * Rejects with `ToolboxError` when the operation failed, `ToolboxUnavailable` when the process
   * could not answer.
   */
  request(op: string, fields: FrameHeader = {}, opts: RequestOptions = {}): Promise<ToolboxReply> {
    return this.#queue.run(() => this.#request(op, fields, opts));
  }

  /** Host pid of the running toolbox process (diagnostics and tests). */
  pid(): number | undefined {
    return this.#sidecar.running?.sidecar.pid;
  }

  /** End the process; later calls fail. Idempotent. */
  stop(): Promise<void> {
    return this.#sidecar.stop((p) => p.close());
  }

  async #request(op: string, fields: FrameHeader, opts: RequestOptions): Promise<ToolboxReply> {
    for (let attempt = 0; ; attempt++) {
      const proc = await this.#sidecar.get();
      if (opts.generation !== undefined && proc.generation !== opts.generation) {
        throw new ToolboxUnavailable('the toolbox restarted during the operation');
      }
      try {
        const frame = await proc.send(
          { ...fields, op },
          opts.payload,
          opts.timeoutMs ?? this.#opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        );
        const h = frame.header;
        if (h.ok !== true) {
          const { id: _id, ok: _ok, payload_bytes: _n, code, message, arg, ...details } = h;
          throw new ToolboxError(
            typeof code === 'string' ? code : 'INTERNAL',
            typeof message === 'string' ? message : 'failed',
            typeof arg === 'string' ? arg : 'path',
            details,
          );
        }
        return { header: h, payload: frame.payload, generation: proc.generation };
      } catch (err) {
        const retry = attempt === 0 && opts.generation === undefined && !this.#sidecar.stopping;
        if (err instanceof ToolboxGone && retry) {
          this.#opts.log?.warn({ op, err: err.message }, 'toolbox died; retrying on a new one');
          continue;
        }
        throw err;
      }
    }
  }

  /** Start process number `generation` and wait for its answer to `init`. */
  async #start(generation: number): Promise<ToolboxProcess> {
    const { home, writable, hidden } = this.#opts;
    let started: ToolboxProcess;
    try {
      started = new ToolboxProcess(this.#opts, generation);
    } catch (err) {
      throw new ToolboxUnavailable(`the toolbox could not start: ${(err as Error).message}`);
    }
    try {
      const init = await started.send(
        { op: 'init', home, writable: writable ?? null, hidden: hidden ?? NOT_SERVED },
        undefined,
        START_TIMEOUT_MS,
      );
      if (init.header.ok !== true) throw new Error(String(init.header.message));
    } catch (err) {
      await started.close(0);
      throw new ToolboxUnavailable(`the toolbox did not start: ${(err as Error).message}`);
    }
    return started;
  }
}
