/**
 * burrow extension: downloads and recordings of an instance (src/server/artifacts/store.ts). Listed and
 * fetched while the instance runs and for the retention time after it stopped (default one hour).
 */
import { z } from 'zod';

const pathId = z.string().min(1);

export const DownloadPath = z.object({ instance_id: pathId, download_id: pathId });
export type DownloadPath = z.input<typeof DownloadPath>;
export const RecordingPath = z.object({ instance_id: pathId, recording_id: pathId });
export type RecordingPath = z.input<typeof RecordingPath>;

export const DOWNLOAD_STATES = ['in_progress', 'completed', 'canceled', 'interrupted'] as const;
export const RECORDING_STATES = ['recording', 'completed', 'failed'] as const;

/** One download: `id` is Chromium's download GUID (what CDP download events carry). */
export const Download = z.looseObject({
  id: z.string(),
  /** The page's file name, made safe (no directory part, no control characters). */
  filename: z.string(),
  /** Bytes: received so far while in progress, the file's size once completed. */
  size: z.number().int().nonnegative(),
  /** Guessed from the file name. */
  mime_type: z.string(),
  created_at: z.string(),
  state: z.enum(DOWNLOAD_STATES),
});
export type Download = z.output<typeof Download>;

export const Recording = z.looseObject({
  id: z.string(),
  filename: z.string(),
  size: z.number().int().nonnegative(),
  /** `video/mp4` (H.264). */
  mime_type: z.string(),
  created_at: z.string(),
  state: z.enum(RECORDING_STATES),
  /** Seconds from start to stop; null while recording. */
  duration_seconds: z.number().nullable(),
  /** Why a `failed` recording has no file (only on failed ones). */
  failure_reason: z.string().optional(),
});
export type Recording = z.output<typeof Recording>;

export const RecordingStartResult = z.looseObject({ recording_id: z.string() });
export type RecordingStartResult = z.output<typeof RecordingStartResult>;
