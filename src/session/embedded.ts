/**
 * The embedded default (docs/architecture.md): with no remote endpoint configured, the first
 * session starts a server in this process on a random loopback port with a random key, later
 * sessions share it, and it stops when the last one releases it. `src/server` is loaded lazily,
 * only then.
 */
import { randomBytes } from 'node:crypto';
import type { RunnableInstanceType } from '../api/index.js';
import { enableBackgroundHandles } from '../internal/background.js';
import { serveLogDestination } from '../internal/log-format.js';

interface WarmPoolView {
  counts(): Record<RunnableInstanceType, number>;
  /** Resolves once the pool holds what it should (or what the instance cap leaves room for). */
  ready(): Promise<void>;
}

interface Shared {
  server: Promise<{ url: string; apiKey: string; warmPool: WarmPoolView; close(): Promise<void> }>;
  users: number;
}

let shared: Shared | undefined;

/** A reference to the embedded server; the server stops when the last lease is released. */
export interface EmbeddedServerLease extends AsyncDisposable {
  /** Base URL of the embedded API, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  /** The random API key of the embedded server, for a `Burrow` client of your own. */
  readonly apiKey: string;
  /** Its warm pool (see `EmbeddedServerOptions.warmPool`). */
  readonly warmPool: WarmPoolView;
  /** Idempotent. */
  release(): Promise<void>;
}

export interface EmbeddedServerOptions {
  /**
   * Instances the embedded server keeps started ahead of demand, so that `openSession` takes one
   * in milliseconds: a number of browser instances, or `{ browser, ubuntu }`. Applies when this
   * call starts the server (a running one keeps its pool). Default none, or `BURROW_WARM_POOL`.
   */
  warmPool?: number | { browser?: number; ubuntu?: number };
}

/**
 * Starts the embedded server, or shares the running one, and holds it until `release()`. Sessions
 * take a lease of their own; holding one across sessions keeps the server (and its warm pool)
 * between them: `await using server = await embeddedServer({ warmPool: 2 });`.
 */
export async function embeddedServer(
  options: EmbeddedServerOptions = {},
): Promise<EmbeddedServerLease> {
  // the server lives in this process: it must not keep a script alive that forgot stop()
  enableBackgroundHandles();
  const current = (shared ??= {
    server: import('../server/index.js').then(({ startServer }) =>
      startServer({
        host: '127.0.0.1',
        port: 0,
        apiKey: `bk_${randomBytes(24).toString('base64url')}`,
        // like a local browser, the embedded one loads pages the caller serves on its own
        // loopback; burrow's own port stays unreachable from instances
        isolation: { allowHostLoopback: true },
        // its log goes to stderr (readable on a terminal): the script's stdout stays the script's
        logDestination: serveLogDestination(process.env, process.stderr) ?? process.stderr,
        ...(options.warmPool !== undefined && { warmPool: options.warmPool }),
      }),
    ),
    users: 0,
  });
  current.users++;
  let server;
  try {
    server = await current.server;
  } catch (err) {
    current.users--;
    if (shared === current) shared = undefined;
    throw err;
  }
  let released: Promise<void> | undefined;
  const release = () =>
    (released ??= (async () => {
      if (--current.users > 0) return;
      if (shared === current) shared = undefined;
      // the server's handles do not hold the process (internal/background.ts), so while its
      // shutdown waits for them (instances' processes, a warm-pool start in flight) this timer
      // does: a script awaiting the release must not end with that await unsettled
      const hold = setInterval(() => {}, 60_000);
      try {
        await server.close();
      } finally {
        clearInterval(hold);
      }
    })());
  return {
    url: server.url,
    apiKey: server.apiKey,
    warmPool: server.warmPool,
    release,
    [Symbol.asyncDispose]: release,
  };
}
