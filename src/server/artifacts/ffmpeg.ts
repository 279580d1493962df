/**
 * The ffmpeg of a recording: Debian's `/usr/bin/ffmpeg`, started inside the instance's sandbox
 * (through the sandbox's spawn chain, as the instance's user, in its cgroup, so its CPU and the
 * file it writes count against the instance), writing H.264 in MP4 into the instance's home.
 * Every frame is scaled and padded to the recording's size (even numbers, as H.264 wants), so a
 * page or display that changes size mid-clip never stops the encoder.
 *
 * Stopping is graceful (stdin closed, or `q` for a grabbing ffmpeg): ffmpeg then writes the MP4
 * index and exits; past a deadline the process is killed and the clip reported failed.
 */
import { constants } from 'node:os';
import type { Writable } from 'node:stream';
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import type { Supervised } from '../../internal/process.js';
import type { SandboxSpawn } from '../sandbox/index.js';

const FFMPEG = '/usr/bin/ffmpeg';
/** Frames per second of recordings. */
export const RECORDING_FPS = 15;
/** How long ffmpeg may take to finalise a clip once asked to stop. */
const FINISH_MS = 15_000;

export interface FfmpegOptions {
  /**
   * Start a process in the instance: `Sandbox.spawn` with the instance's environment added to
   * the one given (`ffmpegIn`).
   */
  spawn: SandboxSpawn;
  /** Kill a process of the instance with everything below it (`Sandbox.terminate`). */
  terminate(proc: Supervised): Promise<void>;
  /** ffmpeg's input options and `-i …`. */
  input: string[];
  /** The MP4 to write, as the process sees it. */
  output: string;
  /** Output size in pixels. */
  size: readonly [number, number];
  fps?: number;
  /** How to ask ffmpeg to stop: close its stdin (a piped input) or send `q` (a grabber). */
  stopBy: 'eof' | 'q';
}

export class FfmpegProcess {
  readonly proc: Supervised;
  readonly stdin: Writable;
  readonly #opts: FfmpegOptions;
  #stderr = '';
  /** Why the process could not be started at all (EAGAIN, ENOENT …). */
  #spawnError: string | undefined;
  #finished: Promise<{ ok: boolean; reason?: string }> | undefined;

  constructor(opts: FfmpegOptions) {
    this.#opts = opts;
    const even = (n: number) => Math.max(2, n - (n % 2));
    const w = even(opts.size[0]);
    const h = even(opts.size[1]);
    const fps = opts.fps ?? RECORDING_FPS;
    const argv = [
      FFMPEG,
      '-hide_banner',
      '-loglevel',
      'error',
      '-nostats',
      ...opts.input,
      '-an',
      '-vf',
      `scale=${w}:${h}:force_original_aspect_ratio=decrease,pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2,format=yuv420p`,
      '-r',
      String(fps),
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-tune',
      'zerolatency',
      '-crf',
      '28',
      '-threads',
      '1',
      '-f',
      'mp4',
      '-y',
      opts.output,
    ];
    this.proc = opts.spawn(argv, { env: {}, stdio: ['pipe', 'ignore', 'pipe'] });
    this.stdin = this.proc.child.stdin!;
    this.stdin.on('error', () => {}); // ffmpeg gone: its exit tells the rest
    this.proc.child.once('error', (err) => (this.#spawnError = err.message));
    this.proc.child.stderr?.on('data', (c: Buffer) => {
      this.#stderr = (this.#stderr + c.toString()).slice(-2000);
    });
  }

  get running(): boolean {
    return this.proc.running;
  }

  /** The end of ffmpeg's error output, for messages. */
  stderrTail(): string {
    return this.#stderr.trim().split('\n').slice(-3).join(' | ');
  }

  /** Why ffmpeg exited (it has, or is about to): its status and the end of its error output. */
  async exitReason(): Promise<string> {
    const info = await this.proc.exited;
    const err = this.proc.child.stderr;
    if (err && !err.readableEnded && !err.destroyed) {
      await raceDeadline(new Promise((r) => err.once('close', r)), 500, { unref: true });
    }
    if (this.#spawnError) return `ffmpeg could not be started: ${this.#spawnError}`;
    return this.#exited(info);
  }

  /** Ask ffmpeg to finish the file; resolve once it exited (killed past the deadline). */
  finish(): Promise<{ ok: boolean; reason?: string }> {
    return (this.#finished ??= (async () => {
      if (this.proc.running) {
        if (this.#opts.stopBy === 'q') this.stdin.end('q');
        else this.stdin.end();
      }
      const done = await raceDeadline(this.proc.exited, FINISH_MS);
      if (done === TIMED_OUT) {
        await this.#opts.terminate(this.proc);
        return { ok: false, reason: 'ffmpeg did not finish in time' };
      }
      if (done.code === 0) return { ok: true };
      return { ok: false, reason: this.#exited(done) };
    })());
  }

  /**
   * `ffmpeg exited with …` and the end of its error output. Inside the sandbox a signal usually
   * arrives as the status the pid namespace's init reports for it (128 + its number).
   */
  #exited(info: { code: number | null; signal: NodeJS.Signals | null }): string {
    let how = info.signal ? `signal ${info.signal}` : `status ${info.code}`;
    const signo = !info.signal && info.code !== null && info.code > 128 ? info.code - 128 : 0;
    const name = Object.entries(constants.signals).find(([, n]) => n === signo)?.[0];
    if (name) how += ` (killed by ${name})`;
    const tail = this.stderrTail();
    return `ffmpeg exited with ${how}${tail ? `: ${tail}` : ''}`;
  }
}

/** What a recorder needs of the instance's sandbox (`Sandbox`). */
export interface RecorderSandbox {
  spawn: SandboxSpawn;
  terminate(proc: Supervised): Promise<void>;
  exec(
    argv: readonly string[],
    opts: { env: Record<string, string>; timeoutMs: number },
  ): Promise<{ code: number | null; stderr: Buffer }>;
}

/**
 * ffmpeg in `box` with the environment `env()`, and a `mkdir -p` run as the instance's user, once
 * per directory (`made`: directories that exist already, e.g. seeded on the fresh disk).
 */
export function ffmpegIn(
  box: RecorderSandbox,
  env: () => Record<string, string>,
  made: readonly string[] = [],
): { ffmpeg: Pick<FfmpegOptions, 'spawn' | 'terminate'>; mkdir(dir: string): Promise<void> } {
  const done = new Set(made);
  return {
    ffmpeg: {
      spawn: (argv, o) => box.spawn(argv, { ...o, env: { ...env(), ...o.env } }),
      terminate: (proc) => box.terminate(proc),
    },
    mkdir: async (dir) => {
      if (done.has(dir)) return;
      const r = await box.exec(['mkdir', '-p', '--', dir], { env: env(), timeoutMs: 10_000 });
      if (r.code !== 0) throw new Error(`mkdir ${dir} failed: ${r.stderr.toString().trim()}`);
      done.add(dir);
    },
  };
}
