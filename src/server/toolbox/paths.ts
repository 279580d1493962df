/**
 * Paths as the tools show them. The file operations themselves run inside the sandbox
 * (toolbox.ts), where the kernel resolves every path in the instance's own view and
 * with its permissions; nothing here resolves or checks a path. What is left: display strings.
 * (The failures the tools report are `ToolFailure`s, computer/failure.ts.)
 */
import { posix } from 'node:path';

/** Whether `path` is `root` or lies below it (both canonical, absolute). */
export const isUnder = (path: string, root: string): boolean =>
  path === root || path.startsWith(root === '/' ? '/' : `${root}/`);

/** `input` made absolute against `home`, `.`/`..` folded lexically: for messages only. */
export function displayPath(home: string, input: string): string {
  return posix.resolve(home, input);
}
