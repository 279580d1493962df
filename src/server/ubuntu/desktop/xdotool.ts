/**
 * Running xdotool: argument arrays (never a shell), a UTF-8 locale, the instance's display, a
 * deadline past which the process is killed, and its complaints turned into action errors.
 */
import { execFile } from 'node:child_process';
import { ToolFailure } from '../../computer/failure.js';

/** Deadline of one xdotool call that does a bounded amount of work, in ms. */
export const XDOTOOL_TIMEOUT_MS = 5_000;

/** The key name xdotool complains about in `stderr`, if it does. */
export function unknownKeyName(stderr: string): string | undefined {
  const m = /No such key name '([^']*)'|Invalid key sequence '([^']*)'/.exec(stderr);
  return m ? (m[1] ?? m[2]) : undefined;
}

/** Runs a command inside the instance (its sandbox's `exec`). */
export type SandboxExec = (
  argv: string[],
  opts: { env: Record<string, string>; timeoutMs: number; stdin?: string },
) => Promise<{ code: number | null; stdout: Buffer; stderr: Buffer; timedOut: boolean }>;

export interface XdotoolOptions {
  /** xdotool binary. */
  bin: string;
  /** X display name, e.g. `:3`. */
  display: string;
  /** Xauthority file granting access to the display, if the server requires one. */
  xauthority?: string | undefined;
  /**
   * Run xdotool inside the instance, as its user: the X server it talks to belongs to the
   * instance, and an X client parsing that server's replies must not be a root process on the
   * host. Without it xdotool is a child of the server (no-isolation mode).
   */
  exec?: SandboxExec | undefined;
}

export class Xdotool {
  readonly #bin: string;
  readonly #env: Record<string, string>;
  readonly #exec: SandboxExec | undefined;

  constructor({ bin, display, xauthority, exec }: XdotoolOptions) {
    this.#bin = bin;
    this.#exec = exec;
    this.#env = {
      PATH: '/usr/bin:/bin',
      LC_ALL: 'C.UTF-8', // xdotool type reads UTF-8 text only under a UTF-8 locale
      DISPLAY: display,
      ...(xauthority !== undefined && { XAUTHORITY: xauthority }),
    };
  }

  /**
   * Runs xdotool with `args` (and `stdin`), killed after `timeoutMs`; resolves with its stdout.
   * Unknown key names, timeouts and failures reject with a ToolFailure; a missing binary with
   * a plain Error (a server fault).
   */
  async run(args: string[], timeoutMs = XDOTOOL_TIMEOUT_MS, stdin?: string): Promise<string> {
    if (!this.#exec) return this.#runHere(args, timeoutMs, stdin);
    const r = await this.#exec([this.#bin, ...args], {
      env: this.#env,
      timeoutMs,
      stdin: stdin ?? '',
    });
    const stderr = r.stderr.toString();
    const key = unknownKeyName(stderr);
    if (key !== undefined) throw new ToolFailure(`Unknown key name '${key}'`);
    if (r.timedOut) throw new ToolFailure(`xdotool did not finish within ${timeoutMs} ms`);
    if (r.code === 127) throw new Error(`${this.#bin} is not installed`);
    if (r.code !== 0)
      throw new ToolFailure(`xdotool failed: ${stderr.trim() || `status ${r.code}`}`);
    return r.stdout.toString();
  }

  #runHere(args: string[], timeoutMs: number, stdin?: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = execFile(
        this.#bin,
        args,
        { env: this.#env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1024 * 1024 },
        (err, stdout, stderr) => {
          const key = unknownKeyName(stderr);
          if (key !== undefined) return reject(new ToolFailure(`Unknown key name '${key}'`));
          if (err) {
            const e = err as NodeJS.ErrnoException & { killed?: boolean };
            if (e.killed)
              return reject(new ToolFailure(`xdotool did not finish within ${timeoutMs} ms`));
            if (e.code === 'ENOENT') return reject(new Error(`${this.#bin} is not installed`));
            return reject(new ToolFailure(`xdotool failed: ${stderr.trim() || e.message}`));
          }
          resolve(stdout);
        },
      );
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(stdin ?? '');
    });
  }
}
