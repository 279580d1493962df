/**
 * The embedded default (DESIGN.md): with no remote endpoint configured, the first session starts
 * a server in this process on a random loopback port with a random key, later sessions share it,
 * and it stops when the last one releases it. `src/server` is loaded lazily, only then.
 */
import { randomBytes } from 'node:crypto';
import { enableBackgroundHandles } from '../internal/background.js';

interface Shared {
  server: Promise<{ url: string; apiKey: string; close(): Promise<void> }>;
  users: number;
}

let shared: Shared | undefined;

/** A reference to the embedded server; the server stops when the last lease is released. */
export interface EmbeddedServerLease extends AsyncDisposable {
  /** Base URL of the embedded API, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  /** The random API key of the embedded server, for a `Burrow` client of your own. */
  readonly apiKey: string;
  /** Idempotent. */
  release(): Promise<void>;
}

/**
 * Starts the embedded server, or shares the running one, and holds it until `release()`. Sessions
 * take a lease of their own; holding one across sessions keeps the server (and its warm state)
 * between them: `await using server = await embeddedServer();`.
 */
export async function embeddedServer(): Promise<EmbeddedServerLease> {
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
      await server.close();
    })());
  return { url: server.url, apiKey: server.apiKey, release, [Symbol.asyncDispose]: release };
}
