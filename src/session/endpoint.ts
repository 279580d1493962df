/**
 * What a session reaches before any instance exists: the driver's peer dependency (checked first,
 * so a missing one fails before the server or an instance is touched), the driver's adapter, and
 * the API (a given client, a remote server, or the embedded default).
 */
import type { PlaywrightConnection } from 'burrow-sandbox/playwright';
import type { PuppeteerConnection } from 'burrow-sandbox/puppeteer';
import { Burrow } from '../client/index.js';
import { abortable } from '../internal/deadline.js';
import type { DriverModule, DriverName } from './driver.js';
import { embeddedServer } from './embedded.js';
import { PeerDependencyError } from './errors.js';
import type { ResolvedOptions } from './options.js';

/** Each driver's connection type. */
export interface Connections {
  playwright: PlaywrightConnection;
  puppeteer: PuppeteerConnection;
}

/** The peer dependency each driver needs, and the entry point that loads it. */
const PEERS: Record<DriverName, readonly [pkg: string, neededBy: string]> = {
  playwright: ['playwright-core', 'burrow-sandbox/playwright'],
  puppeteer: ['puppeteer-core', 'burrow-sandbox/puppeteer'],
};

/** Throws `PeerDependencyError` when `driver`'s peer is not installed (before any instance). */
export async function checkPeer(driver: DriverName): Promise<void> {
  const [pkg, neededBy] = PEERS[driver];
  const name: string = pkg; // a variable: the peer is optional, nothing may import it statically
  await PeerDependencyError.load(pkg, neededBy, () => import(name));
}

/** Adapters load through the public entry points; each loads its own peer dependency. */
export const drivers: { [D in DriverName]: () => Promise<DriverModule<Connections[D]>> } = {
  playwright: () => import('burrow-sandbox/playwright'),
  puppeteer: () => import('burrow-sandbox/puppeteer'),
};

/** Where the API is, and how to give back what reaching it took. */
export interface Endpoint {
  readonly client: Burrow;
  readonly baseUrl: string;
  /** The embedded server, which lives and dies with this process. */
  readonly embedded: boolean;
  /** Closes the client the session made for itself and releases its embedded-server lease. */
  release(): Promise<void>;
}

export async function openEndpoint(endpoint: ResolvedOptions['endpoint']): Promise<Endpoint> {
  switch (endpoint.kind) {
    case 'client': {
      const { client } = endpoint;
      return { client, baseUrl: client.baseUrl, embedded: false, release: async () => {} };
    }
    case 'remote': {
      const client = new Burrow({ baseUrl: endpoint.baseUrl, apiKey: endpoint.apiKey });
      return { client, baseUrl: client.baseUrl, embedded: false, release: () => client.close() };
    }
    case 'embedded': {
      const lease = await embeddedServer();
      const client = new Burrow({ baseUrl: lease.url, apiKey: lease.apiKey });
      const release = async () => {
        await client.close();
        await lease.release();
      };
      return { client, baseUrl: client.baseUrl, embedded: true, release };
    }
  }
}

/** `promise`, unless `signal` aborts first; a value that arrives late goes to `onLate`. */
export async function unlessAborted<T>(
  promise: Promise<T>,
  signal: AbortSignal,
  onLate: (value: T) => unknown,
): Promise<T> {
  signal.throwIfAborted();
  try {
    const value = await abortable(promise, signal);
    signal.throwIfAborted();
    return value;
  } catch (err) {
    promise.then(onLate, () => undefined);
    throw err;
  }
}
