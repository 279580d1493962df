/**
 * Recording a browser instance: the active tab's CDP screencast (`Page.startScreencast`, JPEG
 * frames, each acknowledged) on a DevTools session of the recorder's own (the live view's
 * screencast, screencast.ts, runs on another and is unaffected), fed to ffmpeg's stdin at a
 * steady rate. Chromium sends a frame only when the page repaints, so the recorder keeps the last
 * one and writes it once per tick: the clip's length is the wall-clock time it covered. When ffmpeg
 * reads slower than that, ticks are skipped rather than queued. The active tab is looked up every
 * second; a new tab or a restarted browser moves the screencast there.
 */
import type { ActiveRecording } from '../artifacts/store.js';
import { FfmpegProcess, RECORDING_FPS, type FfmpegOptions } from '../artifacts/ffmpeg.js';
import type { Logger } from '../instances/runtime.js';
import type { CdpConnection } from './cdp.js';

export interface ScreencastRecorderOptions {
  /** The active tab (throws when the browser is stopped or has no tab). */
  page(): Promise<{ cdp: CdpConnection; targetId: string }>;
  /** Size of the clip: the instance's resolution. */
  size: readonly [number, number];
  ffmpeg: Pick<FfmpegOptions, 'spawn' | 'terminate'>;
  log: Logger;
  fps?: number;
}

const FOLLOW_MS = 1_000;

interface Cast {
  cdp: CdpConnection;
  targetId: string;
  sessionId: string;
  off: () => void;
}

/** Start recording into `file` (a path inside the instance). */
export async function recordScreencast(
  opts: ScreencastRecorderOptions,
  file: string,
): Promise<ActiveRecording> {
  const fps = opts.fps ?? RECORDING_FPS;
  const ffmpeg = new FfmpegProcess({
    ...opts.ffmpeg,
    input: ['-f', 'image2pipe', '-framerate', String(fps), '-c:v', 'mjpeg', '-i', 'pipe:0'],
    output: file,
    size: opts.size,
    fps,
    stopBy: 'eof',
  });
  const rec = new ScreencastRecording(opts, ffmpeg, fps);
  try {
    await rec.begin();
    // an ffmpeg that cannot write its file has exited by now
    if (!ffmpeg.running) throw new Error(await ffmpeg.exitReason());
  } catch (err) {
    await rec.stop();
    throw err;
  }
  return rec;
}

class ScreencastRecording implements ActiveRecording {
  readonly ended: Promise<unknown>;
  readonly #opts: ScreencastRecorderOptions;
  readonly #ffmpeg: FfmpegProcess;
  readonly #fps: number;
  #cast: Cast | undefined;
  #frame: Buffer | undefined;
  #t0 = 0;
  #written = 0;
  #blocked = false;
  /** When the last frame was (or will be) acknowledged. */
  #lastAck = 0;
  #tick: NodeJS.Timeout | undefined;
  #follow: NodeJS.Timeout | undefined;
  #following: Promise<void> = Promise.resolve();
  #stopped: Promise<{ ok: boolean; reason?: string }> | undefined;

  constructor(opts: ScreencastRecorderOptions, ffmpeg: FfmpegProcess, fps: number) {
    this.#opts = opts;
    this.#ffmpeg = ffmpeg;
    this.#fps = fps;
    this.ended = ffmpeg.proc.exited;
    ffmpeg.stdin.on('drain', () => (this.#blocked = false));
  }

  async begin(): Promise<void> {
    await this.#followActive(true);
    this.#t0 = performance.now();
    this.#tick = setInterval(() => this.#write(), 1000 / this.#fps);
    this.#follow = setInterval(() => {
      this.#following = this.#following.then(() => this.#followActive(false));
    }, FOLLOW_MS);
  }

  /** Write the latest frame as many times as the clock says are due. */
  #write(): void {
    const frame = this.#frame;
    if (!frame || !this.#ffmpeg.running) return;
    if (this.#written === 0) this.#t0 = performance.now() - 1000 / this.#fps;
    const due = Math.floor(((performance.now() - this.#t0) * this.#fps) / 1000);
    if (this.#blocked) {
      this.#written = due; // ffmpeg is behind: these ticks are dropped
      return;
    }
    // after a long stall (a paused instance) carry on from now rather than catch up
    if (due - this.#written > this.#fps) this.#written = due - 1;
    while (this.#written < due && !this.#blocked) {
      this.#written++;
      if (!this.#ffmpeg.stdin.write(frame)) this.#blocked = true;
    }
  }

  async #followActive(first: boolean): Promise<void> {
    if (this.#stopped) return;
    let page: { cdp: CdpConnection; targetId: string };
    try {
      page = await this.#opts.page();
    } catch (err) {
      if (first) throw err;
      return; // no tab now (or the browser restarts): keep the last frame
    }
    const cast = this.#cast;
    if (cast && cast.cdp === page.cdp && cast.targetId === page.targetId && cast.cdp.isOpen) return;
    await this.#endCast();
    if (this.#stopped) return;
    const { cdp, targetId } = page;
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', {
      targetId,
      flatten: true,
    });
    const off = cdp.on('Page.screencastFrame', (p, sid) => {
      if (sid !== sessionId) return;
      if (typeof p.data === 'string') this.#frame = Buffer.from(p.data, 'base64');
      // Chromium sends the next frame once this one is acknowledged: acknowledging no faster
      // than the clip's rate spares it encoding frames that would be dropped
      const ack = () =>
        cdp.send('Page.screencastFrameAck', { sessionId: p.sessionId }, sessionId).catch(() => {});
      const wait = this.#lastAck + 1000 / this.#fps - performance.now();
      this.#lastAck = performance.now() + Math.max(0, wait);
      if (wait <= 0) void ack();
      else setTimeout(() => void ack(), wait).unref();
    });
    this.#cast = { cdp, targetId, sessionId, off };
    const [width, height] = this.#opts.size;
    await cdp.send(
      'Page.startScreencast',
      { format: 'jpeg', quality: 80, maxWidth: width, maxHeight: height, everyNthFrame: 1 },
      sessionId,
    );
    // a page that does not repaint sends no frame: the clip starts from a screenshot of it
    if (!this.#frame) {
      const shot = await cdp
        .send<{ data: string }>(
          'Page.captureScreenshot',
          { format: 'jpeg', quality: 80 },
          sessionId,
        )
        .catch(() => undefined);
      if (shot && !this.#frame) this.#frame = Buffer.from(shot.data, 'base64');
    }
  }

  async #endCast(): Promise<void> {
    const cast = this.#cast;
    this.#cast = undefined;
    if (!cast) return;
    cast.off();
    if (!cast.cdp.isOpen) return;
    await cast.cdp.send('Target.detachFromTarget', { sessionId: cast.sessionId }).catch(() => {}); // the tab may be gone
  }

  stop(): Promise<{ ok: boolean; reason?: string }> {
    return (this.#stopped ??= (async () => {
      clearInterval(this.#follow);
      await this.#following.catch(() => {});
      this.#write(); // up to now
      clearInterval(this.#tick);
      await this.#endCast();
      const result = await this.#ffmpeg.finish();
      if (result.ok && this.#written === 0) {
        return { ok: false, reason: 'no frame was captured' };
      }
      return result;
    })());
  }
}
