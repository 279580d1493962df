/**
 * Paths as the tools show them. The file operations themselves run inside the sandbox
 * (../sandbox/toolbox.ts), where the kernel resolves every path in the instance's own view and
 * with its permissions; nothing here resolves or checks a path. What is left: the layout a
 * sandbox describes itself with (home, writable binds, hidden paths), display strings, and the
 * error the tools report.
 */
import { posix } from 'node:path';

/** A writable directory of the instance: where it appears in the sandbox and where it lives. */
export interface Bind {
  readonly sandbox: string;
  readonly host: string;
}

export interface ViewLayout {
  /** Sandbox path of the home directory, the base of relative paths. */
  readonly home: string;
  /** The instance's writable directories. */
  readonly binds: readonly Bind[];
  /** Sandbox paths the tools do not serve (masked in the sandbox, /proc, /sys, /dev). */
  readonly hidden: readonly string[];
}

/** A refusal or failure the tools report as `error` (HTTP 200). */
export class ToolError extends Error {
  override name = 'ToolError';
}

export const isUnder = (path: string, root: string): boolean =>
  path === root || path.startsWith(root === '/' ? '/' : `${root}/`);

/** `input` made absolute against `home`, `.`/`..` folded lexically: for messages only. */
export function displayPath(home: string, input: string): string {
  return posix.resolve(home, input);
}

/** A sandbox's layout, as the sandbox describes itself to the runtime. */
export class SandboxView {
  constructor(readonly layout: ViewLayout) {}

  display(input: string): string {
    return displayPath(this.layout.home, input);
  }
}
