/**
 * Recording an ubuntu instance: ffmpeg's `x11grab` of the instance's X display, run inside the
 * sandbox like xdotool and x11vnc (it parses replies of an X server the instance controls), with
 * the display and X authority the instance's own processes use. `q` on its stdin ends the clip.
 */
import type { ActiveRecording } from '../../artifacts/store.js';
import { FfmpegProcess, RECORDING_FPS, type FfmpegOptions } from '../../artifacts/ffmpeg.js';
import { raceDeadline, TIMED_OUT } from '../../../internal/deadline.js';

export interface DisplayRecorderOptions {
  /** `DISPLAY` as seen inside the sandbox. */
  display: string;
  size: readonly [number, number];
  ffmpeg: Pick<FfmpegOptions, 'spawn' | 'terminate'>;
  fps?: number;
}

/** How long ffmpeg has to show it grabs before the start counts as failed. */
const START_CHECK_MS = 300;

export async function recordDisplay(
  opts: DisplayRecorderOptions,
  file: string,
): Promise<ActiveRecording> {
  const fps = opts.fps ?? RECORDING_FPS;
  const [w, h] = opts.size;
  const ffmpeg = new FfmpegProcess({
    ...opts.ffmpeg,
    input: [
      '-f',
      'x11grab',
      '-draw_mouse',
      '1',
      '-framerate',
      String(fps),
      '-video_size',
      `${w}x${h}`,
      '-i',
      opts.display,
    ],
    output: file,
    size: opts.size,
    fps,
    stopBy: 'q',
  });
  // a display it cannot open makes ffmpeg exit at once: report that as the start's failure
  const early = await raceDeadline(ffmpeg.proc.exited, START_CHECK_MS);
  if (early !== TIMED_OUT)
    throw new Error(`could not grab the display: ${await ffmpeg.exitReason()}`);
  return { stop: () => ffmpeg.finish(), ended: ffmpeg.proc.exited };
}
