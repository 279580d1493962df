/**
 * burrow extension: handing an instance to a person for a while (a live view with a message and a
 * "Done" button, behind a token of its own), and the instance's time (`extend`). The idle timeout
 * and the time left are fields of the start request and of the instance (schemas.ts).
 */
import { z } from 'zod';
import { queryNumber } from './schemas.js';

const pathId = z.string().min(1);

/** Longest hand-off, in seconds (one day, the longest an instance lives without an extend). */
export const MAX_HANDOFF_SECONDS = 86_400;
/** Default hand-off lifetime when the request names none: ten minutes. */
export const DEFAULT_HANDOFF_SECONDS = 600;
/** Longest a `GET …/handoff/{handoff_id}` waits, in seconds. */
export const MAX_HANDOFF_WAIT_SECONDS = 60;
/** How long a `GET …/handoff/{handoff_id}` waits when `wait_seconds` is not given. */
export const DEFAULT_HANDOFF_WAIT_SECONDS = 30;
/** Longest message shown on the hand-off page, in characters. */
export const MAX_HANDOFF_MESSAGE = 2_000;

export const HANDOFF_STATUSES = ['pending', 'done', 'expired', 'cancelled'] as const;
export const HandoffStatus = z.enum(HANDOFF_STATUSES);
export type HandoffStatus = z.output<typeof HandoffStatus>;

export const HandoffRequest = z.object({
  /** What the person is asked to do; shown on the page. */
  message: z.string().trim().min(1).max(MAX_HANDOFF_MESSAGE),
  /** Seconds until the hand-off expires; default 600. */
  timeout_seconds: z.int().min(1).max(MAX_HANDOFF_SECONDS).optional(),
});
export type HandoffRequest = z.input<typeof HandoffRequest>;

/** A hand-off: the answer of its creation (with `url`) and of its status call (without it). */
export const Handoff = z.looseObject({
  handoff_id: z.string(),
  instance_id: z.string(),
  status: HandoffStatus,
  message: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
  /** When the person pressed Done, the hand-off expired or the instance stopped. */
  ended_at: z.string().nullish(),
  /** The page for the person; returned once, by the creation only. */
  url: z.string().optional(),
});
export type Handoff = z.output<typeof Handoff>;

export const HandoffPath = z.object({ instance_id: pathId, handoff_id: pathId });
export type HandoffPath = z.input<typeof HandoffPath>;

export const HandoffWaitQuery = z.object({
  /** Seconds to wait for the hand-off to end (0: answer at once); default 30, at most 60. */
  wait_seconds: queryNumber()
    .pipe(z.number().min(0).max(MAX_HANDOFF_WAIT_SECONDS))
    .default(DEFAULT_HANDOFF_WAIT_SECONDS),
});
export type HandoffWaitQuery = z.input<typeof HandoffWaitQuery>;

/** Longest `timeout_hours` of a start, a resume or an extend. */
export const MAX_TIMEOUT_HOURS = 24;

/** `extend`: the instance expires `timeout_hours` from now (not added to what was left). */
export const ExtendRequest = z.object({
  timeout_hours: z.number().min(0.01).max(MAX_TIMEOUT_HOURS),
});
export type ExtendRequest = z.input<typeof ExtendRequest>;
