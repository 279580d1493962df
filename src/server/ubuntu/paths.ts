/**
 * Paths as the tools show them. The file operations themselves run inside the sandbox
 * (../sandbox/toolbox.ts), where the kernel resolves every path in the instance's own view and
 * with its permissions; nothing here resolves or checks a path. What is left: display strings and
 * the error the tools report.
 */
import { posix } from 'node:path';

/** A refusal or failure the tools report as `error` (HTTP 200). */
export class ToolError extends Error {
  override name = 'ToolError';
}

/** Whether `path` is `root` or lies below it (both canonical, absolute). */
export const isUnder = (path: string, root: string): boolean =>
  path === root || path.startsWith(root === '/' ? '/' : `${root}/`);

/** `input` made absolute against `home`, `.`/`..` folded lexically: for messages only. */
export function displayPath(home: string, input: string): string {
  return posix.resolve(home, input);
}
