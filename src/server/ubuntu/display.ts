/**
 * The instance's virtual X display: Xvfb started inside the sandbox (`-noreset -displayfd`),
 * guarded by an MIT-MAGIC-COOKIE so other instances on the same host cannot connect to it
 * (the abstract X socket is reachable from the whole network namespace).
 */
import { randomBytes } from 'node:crypto';
import { lchown } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { raceDeadline, TIMED_OUT } from '../../internal/deadline.js';
import { writeFileAtomic } from '../../internal/fs.js';
import type { Supervised } from '../../internal/process.js';
import { DEFAULT_PROGRAMS } from '../config.js';
import { describeExit, type Sandbox } from '../sandbox/index.js';

const START_TIMEOUT_MS = 15_000;

export interface DisplayInfo {
  /** The X display number `n` (DISPLAY=`:n`). */
  readonly number: number;
  /** Environment for X clients run inside the sandbox (e.g. bash, xdotool via `sandbox.spawn`). */
  readonly sandboxEnv: Readonly<Record<string, string>>;
  /** Environment for X clients run by the server on the host (authority file outside the sandbox). */
  readonly hostEnv: Readonly<Record<string, string>>;
  readonly width: number;
  readonly height: number;
}

export class Display implements DisplayInfo {
  private constructor(
    readonly number: number,
    readonly width: number,
    readonly height: number,
    readonly sandboxEnv: Readonly<Record<string, string>>,
    readonly hostEnv: Readonly<Record<string, string>>,
    readonly process: Supervised,
  ) {}

  /**
   * Start Xvfb at `[width, height]`; resolve once it accepts connections. `onExit` is called when
   * it dies later on its own.
   */
  static async start(
    sandbox: Sandbox,
    resolution: readonly [number, number],
    env: Record<string, string>,
    onExit: (reason: string) => void,
    xvfb: string = DEFAULT_PROGRAMS.xvfb,
  ): Promise<Display> {
    const [width, height] = resolution;
    const cookie = randomBytes(16);
    // the user's copy lives in home (standard place); the server keeps its own outside the sandbox
    const sandboxAuth = posix.join(sandbox.home, '.Xauthority');
    const homeAuth = join(sandbox.hostHome, '.Xauthority');
    const hostAuth = join(sandbox.hostRun, 'Xauthority');
    // The server writes the home copy as root: hand it to the instance's user. Xvfb reads it as
    // that user, and an X server that cannot read its -auth file lets every local client in.
    // lchown: the home is the instance's, a link planted there must not redirect the chown.
    const writeHomeAuth = async (data: Buffer) => {
      await writeFileAtomic(homeAuth, data);
      if (sandbox.uid !== undefined) await lchown(homeAuth, sandbox.uid, sandbox.uid);
    };
    await writeHomeAuth(xauthority(cookie, ''));
    const proc = sandbox.spawn(
      [
        xvfb,
        '-screen',
        '0',
        `${width}x${height}x24`,
        '-nolisten',
        'tcp',
        '-noreset',
        '-auth',
        sandboxAuth,
        '-displayfd',
        '3',
      ],
      { env, stdio: ['ignore', 'ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    proc.child.stderr?.on('data', (c: Buffer) => {
      if (stderr.length < 8192) stderr += c.toString();
    });
    // -displayfd: the display number on fd 3 once Xvfb accepts connections
    const announced = new Promise<number | undefined>((resolve) => {
      let text = '';
      const fd3 = proc.child.stdio[3] as Readable | null;
      fd3?.on('data', (c: Buffer) => {
        text += c.toString();
        // a display number is a few digits: anything longer is not Xvfb speaking
        if (text.includes('\n') || text.length > 16) {
          resolve(Number.parseInt(text, 10));
          fd3.removeAllListeners('data');
          fd3.resume();
        }
      });
      void proc.exited.then(() => resolve(undefined));
    });
    const outcome = await raceDeadline(announced, START_TIMEOUT_MS);
    const number = outcome === TIMED_OUT ? undefined : outcome;
    if (number === undefined || Number.isNaN(number) || !proc.running) {
      await proc.kill(500);
      throw new Error(
        `Xvfb failed to start: ${stderr.trim().split('\n').slice(-3).join(' ') || 'timeout'}`,
      );
    }
    const data = xauthority(cookie, String(number));
    await writeHomeAuth(data);
    await writeFileAtomic(hostAuth, data);
    void proc.exited.then((e) => {
      if (!sandbox.stopping) onExit(`Xvfb exited (${describeExit(e)})`);
    });
    return new Display(
      number,
      width,
      height,
      { DISPLAY: `:${number}`, XAUTHORITY: sandboxAuth },
      { DISPLAY: `:${number}`, XAUTHORITY: hostAuth },
      proc,
    );
  }
}

/** One FamilyWild MIT-MAGIC-COOKIE-1 entry in the Xau file format. */
function xauthority(cookie: Buffer, displayNumber: string): Buffer {
  const field = (b: Buffer) => {
    const len = Buffer.alloc(2);
    len.writeUInt16BE(b.length);
    return Buffer.concat([len, b]);
  };
  const family = Buffer.from([0xff, 0xff]);
  return Buffer.concat([
    family,
    field(Buffer.alloc(0)),
    field(Buffer.from(displayNumber)),
    field(Buffer.from('MIT-MAGIC-COOKIE-1')),
    field(cookie),
  ]);
}
