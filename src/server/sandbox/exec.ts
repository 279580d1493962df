/**
 * A command run inside an instance to completion (`Sandbox.exec`): its output collected up to a
 * bound (the process writing it may be hostile), its stdin written once, and a deadline after
 * which it is ended with everything below it.
 */
import type { StdioOptions } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { Supervised } from '../../internal/process.js';

export interface ExecOptions {
  env: Record<string, string>;
  timeoutMs: number;
  /** Bytes of stdout and of stderr kept (each); default 1 MiB. */
  maxBytes?: number;
  cwd?: string;
  /** Written to the command's stdin (default: no stdin). */
  stdin?: string | Buffer;
}

export interface ExecResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
}

/**
 * Start the command with `start` (given its stdio), collect its output, and at the deadline end
 * it with `end`; resolves once it exited and its output is read.
 */
export async function runToEnd(
  start: (stdio: StdioOptions) => Supervised,
  end: (proc: Supervised) => Promise<void>,
  opts: Pick<ExecOptions, 'timeoutMs' | 'maxBytes' | 'stdin'>,
): Promise<ExecResult> {
  const proc = start([opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe']);
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
  if (opts.stdin !== undefined) {
    proc.child.stdin?.on('error', () => {});
    proc.child.stdin?.end(opts.stdin);
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void end(proc);
  }, opts.timeoutMs);
  const info = await proc.exited;
  clearTimeout(timer);
  await streamsClosed(proc);
  return { code: info.code, signal: info.signal, stdout: out(), stderr: err(), timedOut };
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
