/**
 * A script that forgets `stop()` still ends (issue: "scripts that behave"). Node ends a process
 * once nothing holds its event loop; then `beforeExit` stops the live sessions (exit-guard.ts).
 * What a session holds must therefore not count by itself: the driver's CDP socket is unref'd
 * right after connecting (`connectDetached`), and so are the embedded server's handles
 * (src/internal/background.ts). While the driver has calls in flight (a `goto`, an `evaluate`),
 * `hold` keeps the process alive with one ref'd timer; a poll (itself unref'd) lets it go once
 * every session is idle.
 *
 * Limit: a script that only waits for a page event (`await new Promise(r => page.once(...))`),
 * with no driver call pending and nothing of its own holding the loop, ends there; wait with the
 * driver (`page.waitForEvent`) or hold the session with your own timer.
 */
import type { Socket } from 'node:net';

const POLL_MS = 100;

const busyChecks = new Set<() => boolean>();
/** Ref'd while a session is busy: what keeps the process alive then. */
let keeper: NodeJS.Timeout | undefined;
/** Unref'd: decides whether `keeper` holds. */
let poll: NodeJS.Timeout | undefined;

function decide(): void {
  let busy = false;
  for (const check of busyChecks) {
    try {
      busy = check();
    } catch {
      busy = true; // a driver whose internals changed: keep the process alive as before
    }
    if (busy) break;
  }
  if (busy) keeper?.ref();
  else keeper?.unref();
}

/** Keeps the process alive while `busy()` says so; returns the release. */
export function hold(busy: () => boolean): () => void {
  busyChecks.add(busy);
  keeper ??= setInterval(() => undefined, 2 ** 30);
  poll ??= setInterval(decide, POLL_MS).unref();
  keeper.ref(); // busy until the first poll says otherwise
  return () => {
    if (!busyChecks.delete(busy) || busyChecks.size > 0) return;
    clearInterval(keeper);
    clearInterval(poll);
    keeper = poll = undefined;
  };
}

/** Whether the driver behind `conn` has calls in flight (true when that cannot be told). */
export function driverBusy(conn: { browser: unknown; page: unknown }): () => boolean {
  // playwright-core: its client connection keeps a callback per call in flight
  const callbacks = (conn.browser as { _connection?: { _callbacks?: unknown } } | undefined)
    ?._connection?._callbacks;
  if (callbacks instanceof Map) return () => callbacks.size > 0;
  // puppeteer-core: the CDP connection lists the commands still waiting for an answer
  const client = (conn.page as { _client?: () => unknown } | undefined)?._client?.();
  const connection = (client as { connection?: () => unknown } | undefined)?.connection?.();
  const pending = (connection as { getPendingProtocolErrors?: () => unknown[] } | undefined)
    ?.getPendingProtocolErrors;
  if (typeof pending === 'function') {
    return () => pending.call(connection).length > 0;
  }
  return () => true;
}

type HandleList = () => unknown[];
/** Node's list of the handles holding the event loop (not public API; absent → nothing done). */
const activeHandles: HandleList = () => {
  const list = (process as unknown as { _getActiveHandles?: HandleList })._getActiveHandles;
  return typeof list === 'function' ? list.call(process) : [];
};

const isSocket = (h: unknown): h is Socket =>
  typeof h === 'object' && h !== null && h.constructor?.name === 'Socket' && 'remotePort' in h;

/**
 * Runs `connect` and unrefs the TCP sockets that appeared meanwhile: the driver's WebSocket (to
 * `cdp_url`, or to the transfer proxy, src/session/transfer.ts, and the proxy's own to `cdp_url`),
 * which the drivers do not let one reach otherwise.
 */
export async function connectDetached<T>(connect: () => Promise<T>): Promise<T> {
  const before = new Set(activeHandles().filter(isSocket));
  const result = await connect();
  for (const h of activeHandles()) if (isSocket(h) && !before.has(h)) h.unref();
  return result;
}
