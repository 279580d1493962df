/**
 * Tool failures: what a tool (computer, bash, edit, file, upload) tells its caller went wrong,
 * as opposed to a fault of the server. The tool routes answer such a failure with HTTP 200 and
 * the message in the result's `error`; an error of any other class keeps its own way out (an
 * HTTP error, or a 500). Every tool throws this one class, and the functions below are the one
 * place that turns it into a result.
 */
import type { ToolResult } from '../../api/index.js';

/** A failure a tool reports in its result's `error` (HTTP 200). */
export class ToolFailure extends Error {
  override name = 'ToolFailure';
  /**
   * What failed, for the callers that branch on it: for a file operation, the toolbox's code (an
   * errno name such as `EEXIST`, or one of its own such as `HIDDEN`); otherwise absent.
   */
  readonly code: string | undefined;
  /** The system's words for the code ("Permission denied") when there are any; else the message. */
  readonly reason: string;

  constructor(message: string, opts: { code?: string; reason?: string } = {}) {
    super(message);
    this.code = opts.code;
    this.reason = opts.reason ?? message;
  }
}

/** Whether `err` is a failure to report (rather than a fault to throw on). */
export function isToolFailure(err: unknown): err is ToolFailure {
  return err instanceof ToolFailure;
}

/**
 * The text a tool reports for `err`: a tool failure's message as it is; any other error's
 * message followed by `: subject` when a subject (the path concerned) is given.
 */
export function failureText(err: unknown, subject?: string): string {
  if (err instanceof ToolFailure) return err.message;
  const text = err instanceof Error ? err.message : String(err);
  return subject ? `${text}: ${subject}` : text;
}

/** `fn`'s result, or `{ error }` when it throws a tool failure; other errors propagate. */
export async function reportFailure<T extends ToolResult>(
  fn: () => Promise<T>,
): Promise<T | ToolResult> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ToolFailure) return { error: err.message };
    throw err;
  }
}
