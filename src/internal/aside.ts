/**
 * Short commands (mkfs, mount, umount, …) run by a small helper process of the server's instead
 * of by the server's own process.
 *
 * Node starts a child by `fork()`, which copies the parent's page tables while the parent's main
 * thread waits: the cost grows with the RSS. Measured here (`npm run bench:spawn`): 4 ms at 42 MiB,
 * 35 ms at 745 MiB, 50 ms at 1.5 GiB on an idle machine, several times that on a loaded one; what
 * clients make the server hold (long CDP frames, unread replies, each within its budget) made
 * every instance start and stop stall everyone for as long, once a command. The helper is a Node
 * process with little memory of its own: its forks are cheap, and it forks on its own thread.
 * Started on first use, tied to the server's life (`Supervised`: it dies with the server), and
 * started again after it died; a command in flight when it died fails.
 *
 * A request is one JSON line on its stdin, `{id, file, args, timeoutMs}`; an answer one line on
 * its stdout, `{id, stdout, stderr, error?}`. Output is capped at 1 MiB a stream, as `execFile`'s
 * default is; the environment is the helper's own, a fixed `PATH`.
 */
import type { Readable, Writable } from 'node:stream';
import { createInterface } from 'node:readline';
import { SETPRIV, Supervised } from './process.js';

/** What a command printed, as `execFile` gives it. */
export interface AsideResult {
  stdout: string;
  stderr: string;
}

/** A command that failed (status, signal, timeout or spawn error), as `execFile`'s error. */
export class AsideError extends Error {
  constructor(
    message: string,
    readonly code: number | string | null,
    readonly signal: string | null,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

const HELPER = `
import { execFile } from 'node:child_process';
import { createInterface } from 'node:readline';
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const { id, file, args, timeoutMs } = JSON.parse(line);
  // each command dies with the helper, as the helper dies with the server
  const setpriv = process.env.SETPRIV;
  const [cmd, argv] = setpriv ? [setpriv, ['--pdeathsig', 'SIGKILL', '--', file, ...args]] : [file, args];
  execFile(cmd, argv, { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
    const error = err && { message: err.message, code: err.code ?? null, signal: err.signal ?? null };
    process.stdout.write(JSON.stringify({ id, stdout, stderr, error }) + '\\n');
  });
});
lines.on('close', () => process.exit(0));
`;

interface Pending {
  resolve(r: AsideResult): void;
  reject(err: Error): void;
}

interface Answer extends AsideResult {
  id: number;
  error?: { message: string; code: number | string | null; signal: string | null };
}

let helper: { proc: Supervised; stdin: Writable; stdout: Readable } | undefined;
const pending = new Map<number, Pending>();
let nextId = 1;

function started() {
  if (helper) return helper;
  const proc = new Supervised(process.execPath, ['--input-type=module', '-e', HELPER], {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...(SETPRIV && { SETPRIV }) },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  const stdin = proc.child.stdin!;
  const stdout = proc.child.stdout!;
  stdin.on('error', () => {});
  const self = { proc, stdin, stdout };
  helper = self;
  createInterface({ input: stdout }).on('line', (line) => {
    const answer = JSON.parse(line) as Answer;
    const waiting = pending.get(answer.id);
    if (!waiting) return;
    pending.delete(answer.id);
    idle();
    if (!answer.error) return waiting.resolve({ stdout: answer.stdout, stderr: answer.stderr });
    const { message, code, signal } = answer.error;
    waiting.reject(new AsideError(message, code, signal, answer.stdout, answer.stderr));
  });
  void proc.exited.then(({ code, signal }) => {
    if (helper === self) helper = undefined;
    const why = new Error(`the command helper exited (${signal ?? `status ${code}`})`);
    for (const [id, waiting] of pending) {
      pending.delete(id);
      waiting.reject(why);
    }
  });
  return self;
}

/**
 * Neither the helper nor its pipes keep the server's process alive while nothing is asked of it
 * (an embedded server's script ends when its sessions do); a command in flight does.
 */
function idle(): void {
  if (pending.size > 0 || !helper) return;
  helper.proc.child.unref();
  (helper.stdout as Readable & { unref?(): void }).unref?.();
}

/**
 * Runs `file` with `args` in the helper; resolves with its output once it exits with status 0,
 * rejects with an `AsideError` otherwise. Killed (SIGKILL) after `timeoutMs`, when given.
 */
export function runAside(
  file: string,
  args: readonly string[],
  { timeoutMs = 0 }: { timeoutMs?: number } = {},
): Promise<AsideResult> {
  const { proc, stdin, stdout } = started();
  const id = nextId++;
  proc.child.ref();
  (stdout as Readable & { ref?(): void }).ref?.();
  return new Promise<AsideResult>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    stdin.write(`${JSON.stringify({ id, file, args, timeoutMs })}\n`);
  });
}

/** The helper's pid, once started (tests). */
export const asidePid = (): number | undefined => helper?.proc.pid;
