/**
 * Node side of the kernel layer: one Python bridge process per instance (started lazily inside
 * the sandbox), newline-delimited JSON with request ids over its stdin/stdout, and one FIFO per
 * kernel so that executions on a kernel run one at a time while different kernels run
 * concurrently. The bridge process itself is run as a sidecar (../../sandbox/sidecar.ts).
 */
import { readFile } from 'node:fs/promises';
import type { CodeExecuteResult, KernelInfo } from '../../../api/index.js';
import { LineDecoder } from '../../../internal/lines.js';
import { KeyedSerialQueue } from '../../../internal/serial.js';
import { pythonBoot, pythonMessage } from '../../../internal/python.js';
import { HttpError, serverError } from '../../errors.js';
import type { Logger } from '../../instances/runtime.js';
import type { SandboxSpawn } from '../../sandbox/index.js';
import { Sidecar, SidecarProcess } from '../../sandbox/sidecar.js';
import { decodeReply, type DecodedReply } from './reply-decode.js';
import { replyThread } from './reply-thread.js';

export type { SandboxSpawn } from '../../sandbox/index.js';

/** Debian's interpreter: the `python3` first on PATH may be another one without ipykernel. */
export const SYSTEM_PYTHON = '/usr/bin/python3';

/** Why a kernel's state was lost during a call. */
export type RestartReason =
  /** It had died (or the bridge had) since the last call; a fresh one ran this code. */
  | 'died'
  /** It ignored the interrupt after a timeout and was replaced after this call. */
  | 'unresponsive';

/**
 * An execution's result; its `outputs` stay JSON (UTF-8), decoded off the main thread
 * (reply-decode.ts) and taken as they are by the answer and the notebook file.
 */
export interface RunResult {
  status: CodeExecuteResult['status'];
  execution_count: number | null;
  outputs: Uint8Array;
  stdout: string;
  stderr: string;
  error: CodeExecuteResult['error'];
  restarted?: RestartReason;
}

export interface PoolOptions {
  /** Starts a process inside the instance's sandbox (`Sandbox.spawn`); `env` is complete. */
  spawn: SandboxSpawn;
  /** Kernels' working directory, as a sandbox path. */
  cwd: string;
  /** The complete environment of a process started in the sandbox now (base + instance vars). */
  env: () => Record<string, string> | Promise<Record<string, string>>;
  log?: Logger;
  /** Interpreter with jupyter_client. Default `/usr/bin/python3`. */
  python?: string;
  /** Seconds an interrupted kernel gets to go idle before it is restarted. Default 5. */
  interruptGraceSeconds?: number;
}

/** The bridge process went away with requests in flight. */
class BridgeGone extends Error {
  override name = 'BridgeGone';
}

interface Pending {
  resolve(value: DecodedReply): void;
  reject(err: Error): void;
}

/**
 * The Python side: bridge.py and the modules it imports (shipped beside this module, dependencies
 * first), read once. They reach the bridge process first on its stdin (../../../internal/python.ts),
 * so no file has to be visible in the sandbox.
 */
const MODULES = ['bridge_reply', 'bridge_outputs', 'bridge'] as const;
let bridgeMessage: Promise<Buffer> | undefined;
function readBridgeMessage(): Promise<Buffer> {
  bridgeMessage ??= Promise.all(
    MODULES.map(async (name) => ({
      name,
      source: await readFile(new URL(`./${name}.py`, import.meta.url)),
    })),
  ).then(pythonMessage);
  bridgeMessage.catch(() => (bridgeMessage = undefined));
  return bridgeMessage;
}

/** Loads the modules and runs the bridge; its label names the process on its command line. */
const BOOT = pythonBoot('<burrow-kernel-bridge>');
const READY_TIMEOUT_MS = 30_000;
const STDERR_TAIL = 16 * 1024;
/**
 * Longest reply line (bridge_reply.py's MAX_LINE_BYTES, which trims a result to fit): past it
 * the bridge, or whoever writes into its stdout, is killed. The server decodes each line on its
 * main thread and encodes the answer again: a cell displaying 20 × 10 MB of HTML made a 30 MB
 * answer that stalled every other client for 2.6 s at the former 64 MiB (issue 35). 8 MiB holds
 * any plot or table an agent reads; larger outputs belong in files.
 */
export const MAX_LINE_BYTES = 8 * 1024 * 1024;
/** A reply line starts with its id (bridge.py writes it first). */
const REPLY_ID = /^\{"id":\s?(-?\d+)[,}]/;
/**
 * Reply lines up to this many characters are decoded on the main thread (a few thousand objects
 * at most, a millisecond or two); longer ones in the kernel-reply thread (reply-thread.ts).
 */
const INLINE_CHARS = 16 * 1024;

/** The bridge process (a sidecar, ../../sandbox/sidecar.ts) and the requests it is answering. */
class BridgeProcess {
  readonly sidecar: SidecarProcess;
  readonly #pending = new Map<number, Pending>();
  readonly #lines = new LineDecoder({ maxBytes: MAX_LINE_BYTES });
  #nextId = 1;

  readonly #log: Logger | undefined;

  private constructor(opts: PoolOptions, program: Buffer, env: Record<string, string>) {
    const log = opts.log;
    this.#log = log;
    // Any process of the instance may hold a copy of the stdout pipe's write end: lines are
    // bounded, and nothing is read after a violation or the exit (the sidecar stops reading).
    this.sidecar = new SidecarProcess(
      {
        name: 'the kernel bridge',
        spawn: opts.spawn,
        argv: [opts.python ?? SYSTEM_PYTHON, '-I', '-u', '-c', BOOT],
        env,
        cwd: opts.cwd,
        boot: [program],
        stderrChars: STDERR_TAIL,
        onStderr: (text) => log?.debug({ kernelBridge: text.trimEnd() }, 'kernel bridge stderr'),
        error: (_kind, message) => new BridgeGone(message),
        log,
      },
      { read: (chunk) => this.#read(chunk), failed: (err) => this.#end(err) },
    );
  }

  /** Why `chunk` breaks the protocol, if it does; else the replies it completes settle. */
  #read(chunk: Buffer): string | undefined {
    let got: string[];
    try {
      got = this.#lines.push(chunk);
    } catch (err) {
      return (err as Error).message;
    }
    for (const line of got) {
      // a line nobody asked for, or one too costly to decode: not the bridge speaking
      const why = this.#onLine(line);
      if (why !== undefined) return why;
    }
    return undefined;
  }

  /** No more replies: every call in flight fails with the first reason given. */
  #end(reason: Error): void {
    for (const p of this.#pending.values()) p.reject(reason);
    this.#pending.clear();
  }

  static async start(opts: PoolOptions): Promise<BridgeProcess> {
    const program = await readBridgeMessage();
    const env = {
      ...(await opts.env()),
      PYTHONUNBUFFERED: '1',
      // debugpy's "frozen modules" warning on every kernel start
      PYDEVD_DISABLE_FILE_VALIDATION: '1',
    };
    const bridge = new BridgeProcess(opts, program, env);
    const ready = new Promise<unknown>((resolve, reject) => {
      bridge.#pending.set(0, { resolve, reject });
    });
    try {
      await bridge.sidecar.within(
        ready,
        READY_TIMEOUT_MS,
        'kernel bridge did not start in time',
        500,
      );
    } catch (err) {
      await bridge.sidecar.kill(500);
      throw err;
    }
    return bridge;
  }

  /**
   * Settle the request a reply line answers (a short line at once, a long one once the
   * kernel-reply thread has decoded it); the reason the line breaks the protocol, if it does.
   */
  #onLine(line: string): string | undefined {
    const id = Number(REPLY_ID.exec(line.slice(0, 32))?.[1] ?? NaN);
    const pending = this.#pending.get(id);
    if (!pending) return `a line that answers nothing asked (${line.length} characters)`;
    this.#pending.delete(id);
    if (line.length <= INLINE_CHARS) {
      try {
        return this.#settle(id, pending, decodeReply(line));
      } catch (err) {
        pending.reject(
          new BridgeGone(`the kernel bridge broke its protocol: ${(err as Error).message}`),
        );
        return (err as Error).message;
      }
    }
    replyThread.decode(line).then(
      (reply) => {
        const why = this.#settle(id, pending, reply);
        if (why !== undefined) this.#broke(why, pending);
      },
      (err: Error) => this.#broke(err.message, pending),
    );
    return undefined;
  }

  #settle(id: number, pending: Pending, reply: DecodedReply): string | undefined {
    if (reply.id !== id) return 'a reply whose id is not its first field';
    if (reply.ok) pending.resolve(reply);
    else {
      const e = reply.error!;
      pending.reject(new BridgeRequestError(e.code, e.message));
    }
    return undefined;
  }

  /** A line decoded off the main thread broke the protocol: the bridge fails and is killed. */
  #broke(why: string, pending: Pending): void {
    const err = this.sidecar.fail('broken', `the kernel bridge broke its protocol: ${why}`);
    pending.reject(err);
    this.#log?.error(
      { pid: this.sidecar.pid, why },
      'the kernel bridge broke its protocol; killed',
    );
    void this.sidecar.kill(0);
  }

  request(op: string, fields: Record<string, unknown> = {}): Promise<DecodedReply> {
    const failure = this.sidecar.failure;
    if (failure) return Promise.reject(failure);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.sidecar.write(`${JSON.stringify({ ...fields, id, op })}\n`);
    });
  }

  /** Ask the bridge to shut its kernels down and exit; kill its group after `graceMs`. */
  async close(graceMs: number): Promise<void> {
    // its answer is expected, not a protocol break
    this.#pending.set(-1, { resolve: () => {}, reject: () => {} });
    await this.sidecar.close({
      graceMs,
      killGraceMs: 1000,
      farewell: `${JSON.stringify({ id: -1, op: 'exit' })}\n`,
    });
  }
}

/**
 * The bridge's refusal of one request, with its code. Not a tool failure: `httpError` turns it
 * into the route's HTTP error (400, 503 or 500), or `run` into a dead-kernel result; it never
 * leaves this module.
 */
class BridgeRequestError extends Error {
  override name = 'BridgeRequestError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** An error from the bridge as the HTTP error the route answers with. */
function httpError(err: unknown, kernelName: string): Error {
  if (err instanceof BridgeRequestError) {
    if (err.code === 'no_such_kernel') return serverError('unknown_kernel', { name: kernelName });
    if (err.code === 'start_failed')
      return serverError('kernel_failed_to_start', { name: kernelName, reason: err.message });
    return serverError('kernel_bridge_error', { reason: err.message });
  }
  if (err instanceof HttpError) return err;
  return serverError('kernels_unavailable', { reason: (err as Error).message });
}

/** `timeout` when the caller gives none, in seconds (below the reference SDK's 600 s request timeout). */
export const DEFAULT_TIMEOUT_SECONDS = 300;

export class KernelPool {
  readonly #opts: PoolOptions;
  readonly #bridge: Sidecar<BridgeProcess>;
  /** Kernel keys that have run on the current bridge. */
  #live = new Set<string>();
  /** Kernel keys whose kernel was lost with an earlier bridge: their next run reports it. */
  readonly #lost = new Set<string>();
  /** One FIFO per kernel key. */
  readonly #queues = new KeyedSerialQueue<string>();

  constructor(opts: PoolOptions) {
    this.#opts = opts;
    this.#bridge = new Sidecar({
      start: () => BridgeProcess.start(opts),
      stopped: () => serverError('instance_stopping'),
      // the kernels of the bridge replaced died with it (pdeathsig)
      onReplace: () => {
        for (const key of this.#live) this.#lost.add(key);
        this.#live = new Set();
      },
    });
  }

  /** The running bridge, started (again) when there is none. */
  #getBridge(): Promise<BridgeProcess> {
    return this.#bridge.get();
  }

  /** The PID of the bridge process (a host pid), if it runs. For tests and diagnostics. */
  async bridgePid(): Promise<number | undefined> {
    return (await this.#bridge.settled())?.sidecar.pid;
  }

  /** Installed kernelspecs (jupyter_client's KernelSpecManager). */
  async specs(): Promise<KernelInfo[]> {
    try {
      const bridge = await this.#getBridge();
      return (await bridge.request('specs')).result as KernelInfo[];
    } catch (err) {
      throw httpError(err, '');
    }
  }

  /**
   * Run `code` on the kernel `key` (started from kernelspec `name` on first use, restarted
   * when it died). Runs after the executions already queued on that kernel.
   */
  run(key: string, name: string, code: string, timeoutSeconds?: number): Promise<RunResult> {
    return this.#queues.run(key, () =>
      this.#run(key, name, code, timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS),
    );
  }

  async #run(key: string, name: string, code: string, timeout: number): Promise<RunResult> {
    let bridge: BridgeProcess;
    try {
      bridge = await this.#getBridge();
    } catch (err) {
      throw httpError(err, name);
    }
    const env = await this.#opts.env();
    const lost = this.#lost.delete(key);
    this.#live.add(key); // from now on the bridge may hold a kernel for it (see `shutdown`)
    let raw: RunResult;
    try {
      const reply = await bridge.request('execute', {
        kernel: key,
        name,
        code,
        timeout,
        grace: this.#opts.interruptGraceSeconds ?? 5,
        env,
        cwd: this.#opts.cwd,
      });
      raw = {
        ...(reply.result as Omit<RunResult, 'outputs'>),
        outputs: reply.outputs ?? NO_OUTPUTS,
      };
    } catch (err) {
      if (err instanceof BridgeGone) {
        this.#opts.log?.warn({ err: err.message }, 'kernel bridge died during an execution');
        return deadKernel(
          'the kernel bridge exited during execution; kernels restart on the next call',
        );
      }
      if (err instanceof BridgeRequestError && err.code === 'shut_down') {
        return deadKernel('the kernel was shut down');
      }
      if (err instanceof BridgeRequestError && err.code !== 'internal') this.#live.delete(key);
      throw httpError(err, name);
    }
    if (lost && raw.restarted === undefined) raw.restarted = 'died';
    return raw;
  }

  /**
   * Start the kernel `key` from kernelspec `name` without running anything, so that its first
   * execution finds it ready (a warm-pool instance). Queued like an execution.
   */
  warm(key: string, name: string): Promise<void> {
    return this.#queues.run(key, async () => {
      const bridge = await this.#getBridge();
      this.#live.add(key);
      await bridge.request('warm', {
        kernel: key,
        name,
        env: await this.#opts.env(),
        cwd: this.#opts.cwd,
      });
    });
  }

  /** Shut down the kernel `key` now (interrupting what it runs). Unknown keys are fine. */
  async shutdown(key: string): Promise<void> {
    this.#lost.delete(key);
    if (!this.#live.delete(key)) return;
    const bridge = await this.#bridge.settled();
    if (!bridge) return;
    await bridge.request('shutdown', { kernel: key }).catch(() => undefined);
  }

  /** Shut every kernel down and end the bridge (its group is killed after a grace). Idempotent. */
  stop(): Promise<void> {
    return this.#bridge.stop((bridge) => bridge.close(5000));
  }
}

const NO_OUTPUTS = new TextEncoder().encode('[]');

function deadKernel(evalue: string): RunResult {
  return {
    status: 'error',
    execution_count: null,
    outputs: NO_OUTPUTS,
    stdout: '',
    stderr: '',
    error: { ename: 'DeadKernelError', evalue, traceback: [] },
  };
}
