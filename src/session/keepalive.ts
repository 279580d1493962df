/**
 * An open session holds the process, as a local browser's connection does (issue 20): a script
 * never ends while a session is open and its browser can still deliver events, whether it waits
 * in a driver call (`goto`, `waitForEvent`) or on a bare page event
 * (`await new Promise((r) => page.once('console', r))`). Only `stop()` (or a signal, or a crash:
 * exit-guard.ts) lets go. A script that forgets `stop()` therefore keeps running, as one that
 * forgets `browser.close()` does locally; it is told so once on stderr, naming the session.
 *
 * How: the driver's CDP socket (and the transfer proxy's, and the embedded server's handles) do
 * not hold the loop by themselves; one ref'd timer, the keeper, does. While a driver call is in
 * flight the keeper is ref'd. When no call is, it is unref'd: if something of the script's own
 * (a timer, a server, stdin) still holds the loop, nothing changes; if nothing does, Node emits
 * `beforeExit`, where the keeper is ref'd again, before the process could end, and kept ref'd for
 * a grace period. A loop still empty after that grace, with no driver call meanwhile, is what a
 * forgotten `stop()` looks like (or a long wait for a page event): the notice is printed once and
 * the keeper stays ref'd until the sessions stop. A session whose driver disconnected
 * (`browser.close()`, which over CDP only disconnects) can deliver no more events: an empty loop
 * stops it and the script ends, as a local one does after `browser.close()`. Nothing else
 * changes: the instance keeps its server-side timeout, Ctrl-C stops it, and the ledger's reaper
 * covers a process that dies.
 */
import type { Socket } from 'node:net';

const POLL_MS = 100;
/**
 * How long the loop must have held nothing but the sessions before the notice: longer than the
 * waits scripts usually make for a page event, short enough to explain a hang before one wonders.
 */
const NOTICE_AFTER_MS = 10_000;

/** A session, as the keeper sees it. */
export interface Held {
  /** Whether the driver has calls in flight. */
  busy: () => boolean;
  /**
   * Whether the driver's connection is gone (`browser.close()`): such a session can deliver no
   * more events, so once the loop is empty it is stopped and the script ends, as locally.
   */
  detached: () => boolean;
  /** The instance id, once known. */
  id: () => string | undefined;
  stop: () => Promise<unknown>;
}

const held = new Set<Held>();
/** Ref'd while a session is busy, and after an empty loop: what keeps the process alive. */
let keeper: NodeJS.Timeout | undefined;
/** Unref'd: decides whether `keeper` holds. */
let poll: NodeJS.Timeout | undefined;
/** When a driver call was last seen in flight. */
let lastBusyAt = 0;
/** When the loop first had nothing but the sessions in it, since the last driver call. */
let emptySince: number | undefined;
/** The keeper stays ref'd until then (Infinity once the notice is out). */
let parkedUntil = 0;
let noticed = false;

function detached(h: Held): boolean {
  try {
    return h.detached();
  } catch {
    return false;
  }
}

function anyBusy(): boolean {
  for (const h of held) {
    try {
      if (h.busy()) return true;
    } catch {
      return true; // a driver whose internals changed: hold, as when busy
    }
  }
  return false;
}

function decide(): void {
  const now = Date.now();
  // after the notice the keeper stays ref'd, but a session whose driver went away since can be
  // stopped: probe again
  if (parkedUntil === Infinity && [...held].some(detached)) parkedUntil = 0;
  if (anyBusy()) {
    lastBusyAt = now;
    keeper?.ref();
  } else if (now >= parkedUntil) {
    keeper?.unref(); // probe: if nothing else holds the loop, `beforeExit` comes next
  }
}

/** The loop is empty but for the sessions: hold on, and say so once it has lasted. */
function onBeforeExit(): void {
  if (!keeper) return;
  let open = 0;
  for (const h of held) {
    if (detached(h))
      void h.stop().catch(() => undefined); // its requests hold the loop meanwhile
    else open += 1;
  }
  if (open === 0) return;
  const now = Date.now();
  if (emptySince === undefined || lastBusyAt >= emptySince) emptySince = now;
  keeper.ref();
  if (now - emptySince < NOTICE_AFTER_MS) {
    parkedUntil = emptySince + NOTICE_AFTER_MS;
    return;
  }
  parkedUntil = Infinity;
  if (noticed) return;
  noticed = true;
  const ids = [...held].filter((h) => !detached(h)).map((h) => h.id() ?? '(starting)');
  const what = ids.length === 1 ? `session ${ids[0]} is` : `sessions ${ids.join(', ')} are`;
  process.stderr.write(
    `burrow: ${what} still open and nothing else keeps this process running, so it stays up ` +
      `as with a local browser; if the script is done, it forgot \`await session.stop()\` ` +
      `(use try/finally or \`await using\`); Ctrl-C stops the instance\n`,
  );
}

/** Holds the process for `entry` from now until the returned release is called. */
export function hold(entry: Held): () => void {
  if (held.size === 0) {
    keeper = setInterval(() => undefined, 2 ** 30);
    poll = setInterval(decide, POLL_MS).unref();
    process.on('beforeExit', onBeforeExit);
  }
  held.add(entry);
  keeper?.ref(); // busy until the first poll says otherwise
  return () => {
    if (!held.delete(entry) || held.size > 0) return;
    clearInterval(keeper);
    clearInterval(poll);
    keeper = poll = undefined;
    process.removeListener('beforeExit', onBeforeExit);
    emptySince = undefined;
    parkedUntil = 0;
    noticed = false;
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
