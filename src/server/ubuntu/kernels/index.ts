/**
 * Code execution and notebooks of an ubuntu instance, on real Jupyter kernels (Debian's
 * `python3-ipykernel` and `python3-jupyter-client` under `/usr/bin/python3`), driven by a
 * Python bridge that runs inside the instance's sandbox. The ubuntu runtime (../index.ts) wires
 * it in, and calls `stop()` before stopping the sandbox:
 *
 * ```ts
 * const kernels = createKernels({
 *   spawn: (argv, o) => sandbox.spawn(argv, o),
 *   sandboxHome: sandbox.home,
 *   toolbox, // the instance's (../../toolbox/toolbox.ts)
 *   env: () => instanceEnv.current(), // base environment + the instance's variables
 * });
 * ```
 *
 * Decisions (COMPAT.md "code execution and notebooks"):
 * - `code/execute` runs on one default kernel per instance and kernelspec (`kernel_name`), so
 *   state carries between calls. Calls on one kernel run one at a time, in arrival order.
 * - `timeout` is in seconds, default 300. Past it the kernel is interrupted (SIGINT to its
 *   process group through jupyter_client); the answer has `status: "timeout"`, what was printed
 *   so far, and `error` (the kernel's `KeyboardInterrupt`, else a `TimeoutError`). The kernel
 *   keeps its state. A kernel still busy 5 s after the interrupt is restarted.
 * - Restart notice: a kernel that died (killed, `os._exit`, out of memory, or its bridge died)
 *   is restarted by the next call, whose answer carries `kernel_restarted: true` and starts its
 *   `stderr` with a `[burrow] …` line saying the earlier state is lost. A kernel that ignored the
 *   interrupt is restarted after the call, with the same flag and a `[burrow]` line at the end.
 *   The call during which a kernel dies answers `status: "error"` with a `DeadKernelError`.
 *   Notebook cells carry the same `kernel_restarted: true` (not stored in the `.ipynb`).
 * - An unknown `kernel_name` is a 400; a kernel that cannot start is a 503.
 * - Env: a kernel starts with the instance's environment at that moment; variables set or
 *   deleted later reach running Python (IPython) kernels too, applied to `os.environ` by a
 *   silent execution before their next execution (as COMPAT's decision for bash sessions).
 *   Kernels of other languages see the environment of their start.
 * - Tracebacks come without ANSI colours (IPython's `NoColor`), readable by agents.
 * - Kernels and the bridge die with the instance (`stop`) and with the server, also when it is
 *   SIGKILLed: the bridge runs under the sandbox's death signal, each kernel under
 *   `setpriv --pdeathsig SIGKILL` tied to the bridge.
 */
import { posix } from 'node:path';
import type { CodeExecuteResult } from '../../../api/index.js';
import { EncodedJson } from '../../../internal/encoded-json.js';
import type { KernelsCapability, Logger } from '../../instances/runtime.js';
import { SandboxFiles } from '../../toolbox/files.js';
import { Toolbox } from '../../toolbox/toolbox.js';
import { Notebooks } from './notebooks.js';
import type { SandboxSpawn } from '../../sandbox/index.js';
import { KernelPool, type RunResult } from './pool.js';

export type { SandboxSpawn } from '../../sandbox/index.js';
export { DEFAULT_TIMEOUT_SECONDS, SYSTEM_PYTHON } from './pool.js';

export interface KernelsOptions {
  /** Start a process inside the instance's sandbox (`Sandbox.spawn`). */
  spawn: SandboxSpawn;
  /**
   * The instance's home as seen inside the sandbox: the kernels' working directory; notebooks
   * live in `<sandboxHome>/notebooks`.
   */
  sandboxHome: string;
  /**
   * The instance's toolbox, through which notebook files are read and written inside the
   * sandbox. Default: one of its own, started with `spawn` (and stopped by `stop`).
   */
  toolbox?: Toolbox;
  /**
   * The complete environment a process started in the sandbox now gets (HOME, PATH, LANG,
   * DISPLAY … plus the instance's variables). Read at each kernel start and execution.
   */
  env: () => Record<string, string> | Promise<Record<string, string>>;
  log?: Logger;
  /** Interpreter that has jupyter_client. Default `/usr/bin/python3`. */
  python?: string;
  /** Seconds an interrupted kernel gets to go idle before it is restarted. Default 5. */
  interruptGraceSeconds?: number;
}

/** code/execute's answer; `kernel_restarted` is present (true) only when state was lost. */
export type CodeExecuteAnswer = CodeExecuteResult & { kernel_restarted?: true };

/** The kernels capability of an ubuntu instance, with what the runtime needs besides. */
export interface Kernels extends KernelsCapability {
  execute(
    code: string,
    kernelName: string,
    timeoutSeconds: number | undefined,
  ): Promise<EncodedJson<CodeExecuteAnswer>>;
  /** Start the `code/execute` kernel of `kernelName` ahead of its first use (warm pool). */
  warm(kernelName: string): Promise<void>;
  /** Host pid of the bridge process while it runs (diagnostics, tests). */
  bridgePid(): Promise<number | undefined>;
  /** Shut every kernel down and end the bridge. Idempotent. */
  stop(): Promise<void>;
}

export const codeKernelKey = (kernelName: string) => `code:${kernelName}`;

const DIED_NOTE =
  '[burrow] The kernel had died and was restarted for this execution; its earlier state is lost.\n';
const UNRESPONSIVE_NOTE =
  '[burrow] The kernel did not stop after the interrupt and was restarted; its state is lost.\n';

/**
 * The wire answer of code/execute for a kernel's result (see the restart notice above), encoded:
 * the outputs' JSON (reply-decode.ts) is spliced in as it is, never decoded on the main thread.
 */
export function toCodeExecuteAnswer(result: RunResult): EncodedJson<CodeExecuteAnswer> {
  const { restarted, outputs, ...rest } = result;
  const answer: Omit<RunResult, 'outputs' | 'restarted'> & { kernel_restarted?: true } = {
    ...rest,
  };
  if (restarted === 'died') {
    answer.stderr = DIED_NOTE + answer.stderr;
    answer.kernel_restarted = true;
  } else if (restarted === 'unresponsive') {
    const sep = answer.stderr === '' || answer.stderr.endsWith('\n') ? '' : '\n';
    answer.stderr = `${answer.stderr}${sep}${UNRESPONSIVE_NOTE}`;
    answer.kernel_restarted = true;
  }
  // `{…}` without its closing brace, then `,"outputs":[…]}`
  const head = JSON.stringify(answer).slice(0, -1);
  const comma = head === '{' ? '' : ',';
  return new EncodedJson(
    Buffer.concat([Buffer.from(`${head}${comma}"outputs":`), outputs, Buffer.from('}')]),
  );
}

export function createKernels(opts: KernelsOptions): Kernels {
  const pool = new KernelPool({
    spawn: opts.spawn,
    cwd: opts.sandboxHome,
    env: opts.env,
    ...(opts.log ? { log: opts.log } : {}),
    ...(opts.python ? { python: opts.python } : {}),
    ...(opts.interruptGraceSeconds ? { interruptGraceSeconds: opts.interruptGraceSeconds } : {}),
  });
  const toolbox =
    opts.toolbox ??
    new Toolbox({
      spawn: opts.spawn,
      home: opts.sandboxHome,
      ...(opts.log ? { log: opts.log } : {}),
    });
  const files = new SandboxFiles(toolbox);
  const notebooks = new Notebooks(pool, files, posix.join(opts.sandboxHome, 'notebooks'));
  return {
    execute: async (code, kernelName, timeoutSeconds) =>
      toCodeExecuteAnswer(
        await pool.run(codeKernelKey(kernelName), kernelName, code, timeoutSeconds),
      ),
    notebooks,
    warm: (kernelName) => pool.warm(codeKernelKey(kernelName), kernelName),
    bridgePid: () => pool.bridgePid(),
    stop: async () => {
      await pool.stop();
      if (!opts.toolbox) await toolbox.stop();
    },
  };
}
