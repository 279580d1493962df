/**
 * The toolbox: one long-lived Python process (toolbox.py, stdlib only, Debian's
 * `/usr/bin/python3`) inside an instance's sandbox, which does the file operations of the edit,
 * file, upload and notebook tools. It is started like any other process of the instance (the
 * sandbox's `spawn`): as the instance's user, in its mount namespace, so the kernel resolves every
 * path in the instance's own view and applies the instance's permissions. No symlink, `..` or
 * race can take an operation outside what the instance itself can reach, and what the instance
 * cannot read, the tools cannot read.
 *
 * - The source is sent on stdin (`python3 -I -c <boot>` reads it first), so nothing of the
 *   package needs to be visible inside the sandbox; then stdin/stdout carry frames
 *   (frames.ts): JSON headers with binary payloads, no base64.
 * - Started on the first call; one request at a time, in call order (a serial queue); every call
 *   has a deadline, and a process that misses it is killed. A process that died is replaced by
 *   the next call, and a call that was in flight when it died is retried once on the new one.
 * - It is a process of the sandbox: paused, resumed and killed with the instance. `stop()` ends
 *   it earlier.
 */
import type { StdioOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import type { Supervised } from '../../internal/process.js';
import { SerialQueue } from '../../internal/serial.js';
import type { Logger } from '../../internal/log.js';
import { encodeFrame, FrameDecoder, type Frame, type FrameHeader } from './frames.js';

/** Starts `argv` inside the instance's sandbox (`Sandbox.spawn`); `cwd` is a sandbox path. */
export type ToolboxSpawn = (
  argv: readonly string[],
  options: { env: Record<string, string>; stdio: StdioOptions; cwd: string },
) => Supervised;

/** Paths the tools never serve, whatever the sandbox shows there. */
export const NOT_SERVED: readonly string[] = ['/proc', '/sys', '/dev'];

export interface ToolboxOptions {
  spawn: ToolboxSpawn;
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
/** Reads the source (its byte length on the first line, then the bytes) and runs it. */
const BOOT =
  "import sys;b=sys.stdin.buffer;exec(compile(b.read(int(b.readline())),'toolbox.py','exec'))";

let source: Buffer | undefined;
const toolboxSource = () => (source ??= readFileSync(new URL('./toolbox.py', import.meta.url)));

/** One toolbox process and the call it is answering. */
class ToolboxProcess {
  readonly #decoder = new FrameDecoder();
  #waiting: { id: number; resolve(frame: Frame): void; reject(err: Error): void } | undefined;
  #gone: Error | undefined;
  #stderr = '';
  #nextId = 1;

  constructor(
    readonly proc: Supervised,
    readonly generation: number,
    log: Logger | undefined,
  ) {
    const { stdin, stdout, stderr } = proc.child;
    stdin?.on('error', () => undefined); // EPIPE after an exit: reported through `exited`
    stderr?.setEncoding('utf8');
    stderr?.on('data', (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-STDERR_TAIL);
    });
    // Any process of the instance may hold a copy of this pipe's write end (pidfd_getfd): it is
    // read only while a reply is awaited, within the frame bounds, and never after a violation
    // or the exit (a copy keeps it open after that).
    const violated = (why: string) => {
      log?.error({ pid: proc.pid, why }, 'the toolbox broke its protocol; killed');
      this.#fail(new ToolboxUnavailable(`the toolbox broke its protocol: ${why}`));
      stdout?.destroy();
      void proc.kill(0);
    };
    stdout?.on('data', (chunk: Buffer) => {
      if (this.#gone) return void stdout?.destroy();
      if (!this.#waiting) return violated(`${chunk.length} bytes nobody asked for`);
      let frames: Frame[];
      try {
        frames = this.#decoder.push(chunk);
      } catch (err) {
        return violated((err as Error).message);
      }
      for (const frame of frames) {
        if (!this.#deliver(frame)) return violated('a reply nobody asked for');
      }
    });
    void proc.exited.then((info) => {
      const how = info.signal ? `signal ${info.signal}` : `status ${info.code}`;
      const tail = this.#stderr.trim().slice(-400);
      this.#fail(new ToolboxGone(`the toolbox exited (${how})${tail ? `: ${tail}` : ''}`));
    });
  }

  get running(): boolean {
    return this.#gone === undefined && this.proc.running;
  }

  /** Send one request and wait for its reply, at most `timeoutMs` (then the process is killed). */
  async send(
    header: FrameHeader,
    payload: Uint8Array | undefined,
    timeoutMs: number,
  ): Promise<Frame> {
    if (this.#gone) throw this.#gone;
    const id = this.#nextId++;
    const reply = new Promise<Frame>((resolve, reject) => {
      this.#waiting = { id, resolve, reject };
    });
    const stdin = this.proc.child.stdin;
    for (const part of encodeFrame({ ...header, id }, payload)) stdin?.write(part);
    const outcome = await raceDeadline(reply, timeoutMs);
    if (outcome !== TIMED_OUT) return outcome;
    const seconds = Math.round(timeoutMs / 100) / 10;
    this.#fail(new ToolboxUnavailable(`the file operation did not finish within ${seconds} s`));
    void this.proc.kill(200);
    throw this.#gone!;
  }

  /** Write the boot source (before the first frame). */
  boot(): void {
    const src = toolboxSource();
    this.proc.child.stdin?.write(`${src.length}\n`);
    this.proc.child.stdin?.write(src);
  }

  /** Hand `frame` to the call awaiting it; false when it answers no such call. */
  #deliver(frame: Frame): boolean {
    const waiting = this.#waiting;
    if (!waiting || frame.header.id !== waiting.id) return false;
    this.#waiting = undefined;
    waiting.resolve(frame);
    return true;
  }

  #fail(err: Error): void {
    this.#gone ??= err;
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.reject(this.#gone);
  }

  /** End it: EOF on stdin (it exits on its own), then its group is killed after a grace. */
  async close(graceMs = 500): Promise<void> {
    this.#fail(new ToolboxUnavailable('the toolbox is stopped'));
    this.proc.child.stdin?.end();
    await raceDeadline(this.proc.exited, graceMs, { unref: true });
    await this.proc.kill(200);
  }
}

export class Toolbox {
  readonly #opts: ToolboxOptions;
  #process: ToolboxProcess | undefined;
  #generation = 0;
  readonly #queue = new SerialQueue();
  #stopping: Promise<void> | undefined;

  constructor(opts: ToolboxOptions) {
    this.#opts = opts;
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
    return this.#process?.running ? this.#process.proc.pid : undefined;
  }

  /** End the process; later calls fail. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#process?.close();
    })();
    return this.#stopping;
  }

  async #request(op: string, fields: FrameHeader, opts: RequestOptions): Promise<ToolboxReply> {
    for (let attempt = 0; ; attempt++) {
      const proc = await this.#running();
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
        const retry = attempt === 0 && opts.generation === undefined && !this.#stopping;
        if (err instanceof ToolboxGone && retry) {
          this.#opts.log?.warn({ op, err: err.message }, 'toolbox died; retrying on a new one');
          continue;
        }
        throw err;
      }
    }
  }

  /** The running process, started when there is none (only called from the queue). */
  async #running(): Promise<ToolboxProcess> {
    if (this.#stopping) throw new ToolboxUnavailable('the toolbox is stopped');
    if (this.#process?.running) return this.#process;
    const previous = this.#process;
    this.#process = undefined;
    if (previous) await previous.proc.kill(0); // stragglers of its group
    const { spawn, home, python, writable, hidden } = this.#opts;
    let proc: Supervised;
    try {
      proc = spawn([python ?? DEFAULT_PYTHON, '-I', '-c', BOOT], {
        env: { HOME: home, PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
        stdio: ['pipe', 'pipe', 'pipe'],
        cwd: home,
      });
    } catch (err) {
      throw new ToolboxUnavailable(`the toolbox could not start: ${(err as Error).message}`);
    }
    const started = new ToolboxProcess(proc, ++this.#generation, this.#opts.log);
    started.boot();
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
    this.#process = started;
    return started;
  }
}
