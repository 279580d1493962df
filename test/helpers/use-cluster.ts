/**
 * A cluster for a test file, written once: a real PostgreSQL (postgres.ts), a directory holding
 * every node's data dir and the auth-state key file the nodes share, and `n` nodes started in
 * this process on loopback ports, one after the other (node-1 first: it migrates the empty
 * database). More nodes can join later, in this process (`node`) or as real processes that a test
 * can kill (`processNode`, on top of cluster.ts). Everything ends after the file's tests: the
 * nodes, the database connection, PostgreSQL, the directory.
 *
 * Each node gets the options every cluster file gave its nodes (its own data dir, the shared key,
 * no warm pool unless given, since placement is asserted node by node, a 5 s lease) and what the
 * file adds through `options`, which may be read only when the nodes start.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { Database } from '../../src/server/cluster/database.js';
import type { ClusterOptions } from '../../src/server/config.js';
import type { ServerOptions } from '../../src/server/index.js';
import { killNode, startNode, type NodeProcess, type NodeProcessOptions } from './cluster.js';
import { startPostgres, type TestPostgres } from './postgres.js';
import { testServer, type TestServer } from './server.js';

/** What a file adds to a node's options; `cluster` is merged into the node's cluster options. */
export type NodeOptions = Omit<ServerOptions, 'cluster'> & { cluster?: Partial<ClusterOptions> };

export interface UseClusterOptions {
  /** The prefix of the temp directory's name (`burrow-cluster-`). */
  prefix?: string;
  /** Options of node `name` (the `index`-th, from 0) besides the shared ones. */
  options?: (name: string, index: number) => NodeOptions;
  /** Open a `Database` on the cluster's PostgreSQL too (`db`). */
  database?: boolean;
  /** The `beforeAll`'s timeout (ms). */
  timeout?: number;
}

export interface UsedCluster {
  readonly pg: TestPostgres;
  /** The directory of the nodes' data dirs. */
  readonly dir: string;
  /** The auth-state key file every node shares. */
  readonly keyFile: string;
  /** A connection to the cluster's database (only with `database: true`). */
  readonly db: Database;
  /** The nodes started before the tests: node-1 … node-n. */
  readonly nodes: readonly TestServer[];
  /** Start another node in this process; it is closed with the others. */
  node(name: string, extra?: NodeOptions): Promise<TestServer>;
  /** Start a node as a real process (cluster.ts); it is killed after the tests. */
  processNode(
    name: string,
    extra: Omit<NodeProcessOptions, 'name' | 'databaseUrl' | 'dir' | 'secretKeyFile'>,
  ): Promise<NodeProcess>;
}

/** A cluster of `n` nodes on one real PostgreSQL, before the file's tests. */
export function useCluster(n: number, use: UseClusterOptions = {}): UsedCluster {
  let pg: TestPostgres | undefined;
  let dir: string | undefined;
  let db: Database | undefined;
  const servers: TestServer[] = [];
  const processes: NodeProcess[] = [];
  const ready = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`useCluster: no ${what} yet (read it in a test)`);
    return value;
  };
  const keyFile = () => join(ready(dir, 'directory'), 'secret.key');

  const node = async (name: string, extra: NodeOptions = {}): Promise<TestServer> => {
    const { cluster, ...rest } = extra;
    const server = await testServer({
      dataDir: join(ready(dir, 'directory'), name),
      secretKeyFile: keyFile(),
      warmPool: 0,
      ...rest,
      cluster: {
        databaseUrl: ready(pg, 'PostgreSQL').url,
        nodeName: name,
        leaseSeconds: 5,
        ...cluster,
      },
    });
    servers.push(server);
    return server;
  };

  beforeAll(async () => {
    pg = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), use.prefix ?? 'burrow-cluster-'));
    writeFileSync(keyFile(), `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    for (let i = 0; i < n; i++) {
      const name = `node-${i + 1}`;
      await node(name, use.options?.(name, i));
    }
    if (use.database) db = await Database.open({ url: pg.url });
  }, use.timeout);

  afterAll(async () => {
    await Promise.all(processes.map((p) => killNode(p)));
    for (const server of servers) await server.close();
    await db?.close();
    pg?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  return {
    get pg() {
      return ready(pg, 'PostgreSQL');
    },
    get dir() {
      return ready(dir, 'directory');
    },
    get keyFile() {
      return keyFile();
    },
    get db() {
      return ready(db, 'database (useCluster(n, { database: true }))');
    },
    get nodes() {
      return servers.slice(0, n);
    },
    node,
    async processNode(name, extra) {
      const started = await startNode({
        name,
        databaseUrl: ready(pg, 'PostgreSQL').url,
        dir: ready(dir, 'directory'),
        secretKeyFile: keyFile(),
        ...extra,
      });
      processes.push(started);
      return started;
    },
  };
}
