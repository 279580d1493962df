/**
 * Paths as the tools show them. The file operations themselves run inside the sandbox
 * (toolbox.ts), where the kernel resolves every path in the instance's own view and
 * with its permissions; nothing here resolves or checks a path. What is left: display strings and
 * the error the tools report.
 */
import { posix } from 'node:path';

/** A refusal or failure the tools report as `error` (HTTP 200). */
export class ToolError extends Error {
  override name = 'ToolError';
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The message a tool reports for a failure: ours verbatim, others with the path they concern. */
export function toolMessage(err: unknown, display?: string): string {
  if (err instanceof ToolError) return err.message;
  const text = errorText(err);
  return display ? `${text}: ${display}` : text;
}

/** Whether `path` is `root` or lies below it (both canonical, absolute). */
export const isUnder = (path: string, root: string): boolean =>
  path === root || path.startsWith(root === '/' ? '/' : `${root}/`);

/** `input` made absolute against `home`, `.`/`..` folded lexically: for messages only. */
export function displayPath(home: string, input: string): string {
  return posix.resolve(home, input);
}
