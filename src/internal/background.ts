/**
 * Handles that must not keep the process alive by themselves. In a script using the embedded
 * server (src/session/embedded.ts), the server, its connections, its instances' processes and
 * their pipes live in the script's own process: were they to hold the event loop, a script would
 * never end once its sessions are stopped, and the forgotten-`stop()` probe of
 * src/session/keepalive.ts could not tell an idle script from a busy one. The embedded server
 * turns this on before it starts; the places that create such handles pass them through
 * `background`/`backgroundChild`. While a session is open, keepalive.ts holds the process
 * instead. A server started on its own (`burrow serve`, `startServer`) never turns it on.
 */
import type { ChildProcess } from 'node:child_process';

let on = false;

/** Turns background handles on for the rest of the process's life. */
export function enableBackgroundHandles(): void {
  on = true;
}

/** `handle`, unref'd when background handles are on. */
export function background<T extends { unref(): unknown }>(handle: T): T {
  if (on) handle.unref();
  return handle;
}

/** Unrefs `child` and its pipes when background handles are on. */
export function backgroundChild(child: ChildProcess): void {
  if (!on) return;
  child.unref();
  for (const pipe of child.stdio) (pipe as { unref?: () => void } | null)?.unref?.();
  (child.channel as { unref?: () => void } | null | undefined)?.unref?.();
}
