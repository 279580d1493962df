/**
 * The set-up most integration files share, written once: a real server for the whole file
 * (`useServer`), and an instance on it (`useInstance`). Each registers its own `beforeAll` and
 * `afterAll` where it is called, so a file says what it needs in one line and nothing else of its
 * set-up changes: the options are the ones the file passes, given to `testServer` unchanged.
 *
 * Hooks run in the order they are registered and the `afterAll`s in reverse (vitest's `stack`
 * order): a file that checks what the server left behind registers that check before it calls
 * `useServer`, so the server is closed first.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { Burrow, type BurrowOptions } from '../../src/client/index.js';
import type { ServerOptions } from '../../src/server/index.js';
import { testServer, type TestServer } from './server.js';

/** The file's server once its `beforeAll` ran: the server itself, with a typed client. */
export type UsedServer = TestServer & {
  /** The started server (the handle reads as it too). */
  readonly server: TestServer;
  /** A client of the server with its key; made on first use, closed with the server. */
  readonly client: Burrow;
};

export interface UseServerOptions {
  /** The `beforeAll`'s timeout (ms); default the config's hook timeout. */
  timeout?: number;
  /** Options of `client` besides its base URL and key. */
  client?: Omit<BurrowOptions, 'baseUrl' | 'apiKey'>;
}

/**
 * Start a server before the file's tests and close it after them. The options may be a function,
 * read when the hook runs, for values an earlier hook makes (a port, a directory).
 */
export function useServer(
  options: ServerOptions | (() => ServerOptions) = {},
  use: UseServerOptions = {},
): UsedServer {
  let server: TestServer | undefined;
  let client: Burrow | undefined;
  const started = (): TestServer => {
    if (!server) throw new Error('useServer: read the server inside a test or a later hook');
    return server;
  };
  beforeAll(async () => {
    server = await testServer(typeof options === 'function' ? options() : options);
  }, use.timeout);
  afterAll(async () => {
    await client?.close();
    await server?.close();
  });
  // A proxy rather than a copy: the server exists only once the hook ran, and the handle has to
  // read as that server (its fields, `api`, `close`) wherever a test passes it on.
  return new Proxy({} as UsedServer, {
    get(_, key) {
      if (key === 'then') return undefined; // not a promise, whatever awaits it
      if (key === 'server') return started();
      if (key === 'client') {
        const s = started();
        client ??= new Burrow({ ...use.client, baseUrl: s.url, apiKey: s.apiKey });
        return client;
      }
      return Reflect.get(started(), key);
    },
  });
}

/** An instance started on the file's server before its tests: its id (and a browser's cdp_url). */
export interface UsedInstance {
  readonly id: string;
  /** The `cdp_url` of a browser instance (read once, when it starts). */
  readonly cdpUrl: string;
}

/**
 * Start an instance of `type` on `server` (a `useServer` handle, called first) in a `beforeAll`,
 * asserting the start answered 200; `body` adds start options. It ends with the server.
 */
export function useInstance(
  server: UsedServer,
  type: 'browser' | 'ubuntu',
  body: Record<string, unknown> = {},
  timeout?: number,
): UsedInstance {
  let id: string | undefined;
  let cdpUrl: string | undefined;
  beforeAll(async () => {
    const res = await server.api('/v1/start', { json: { instance_type: type, ...body } });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    id = (JSON.parse(text) as { id: string }).id;
    if (type !== 'browser') return;
    const url = await server.api(`/v1/instance/${id}/browser/cdp_url`);
    cdpUrl = ((await url.json()) as { cdp_url: string }).cdp_url;
  }, timeout);
  const read = (value: string | undefined, what: string): string => {
    if (value === undefined)
      throw new Error(`useInstance: no ${what} (not started, or no browser)`);
    return value;
  };
  return {
    get id() {
      return read(id, 'id');
    },
    get cdpUrl() {
      return read(cdpUrl, 'cdp_url');
    },
  };
}
