/**
 * Never leak an instance: while any session is live, SIGINT, SIGTERM and an uncaught exception
 * first stop every live session, then let the process end as it would have:
 * a signal is re-raised (when no other listener owns it), an uncaught exception is printed and
 * exits with code 1 (when no other listener handles it). The listeners exist only while a session
 * is live, so an idle process behaves exactly as without burrow. An open session never lets the
 * loop empty (keepalive.ts), so there is no `beforeExit` to stop sessions on.
 */
import { inspect } from 'node:util';
import { raceDeadline } from '../internal/deadline.js';

export interface Stoppable {
  stop(): Promise<unknown>;
}

/** How long the exit path waits for sessions to stop before ending the process anyway. */
const EXIT_DEADLINE_MS = 15_000;
const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

const live = new Set<Stoppable>();
let signalled = false;
let crashing = false;

/** Stops every live session; settles when all settled or after the deadline. */
async function stopAll(deadlineMs = EXIT_DEADLINE_MS): Promise<void> {
  await raceDeadline(Promise.allSettled([...live].map((s) => s.stop())), deadlineMs);
}

function onSignal(signal: NodeJS.Signals): void {
  const owned = process.listenerCount(signal) === 1; // only ours: the default action is ours to do
  if (signalled) {
    if (owned) reraise(signal); // a second Ctrl-C: go now
    return;
  }
  signalled = true;
  if (owned) {
    const n = live.size;
    process.stderr.write(
      `\nburrow: ${signal}: stopping ${n} session${n === 1 ? '' : 's'} (again to quit at once)\n`,
    );
  }
  void stopAll().finally(() => {
    signalled = false;
    if (owned) reraise(signal);
  });
}

function reraise(signal: NodeJS.Signals): void {
  process.removeListener(signal, onSignal);
  process.kill(process.pid, signal);
}

function onUncaught(error: unknown): void {
  if (process.listenerCount('uncaughtException') > 1) return; // someone else handles it
  // Stopping after a signal makes the driver's pending calls fail ("Target closed"): that is the
  // signal's doing, not a crash; the process ends with the signal once the sessions are stopped.
  if (signalled) return;
  if (crashing) return;
  crashing = true;
  process.stderr.write(`${inspect(error)}\n\nNode.js ${process.version}\n`);
  process.exitCode = 1;
  void stopAll().finally(() => process.exit(1));
}

function install(): void {
  for (const signal of SIGNALS) process.on(signal, onSignal);
  process.on('uncaughtException', onUncaught);
}

function uninstall(): void {
  for (const signal of SIGNALS) process.removeListener(signal, onSignal);
  process.removeListener('uncaughtException', onUncaught);
}

/** Guards `s` until the returned function is called. */
export function guard(s: Stoppable): () => void {
  if (live.size === 0) install();
  live.add(s);
  return () => {
    if (live.delete(s) && live.size === 0) uninstall();
  };
}
