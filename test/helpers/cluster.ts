/**
 * Cluster nodes as real processes on loopback (`burrow serve --cluster …`), so that a test can
 * `kill -9` one, send it SIGTERM and see it exit. Each node gets a data dir of its own, the
 * cluster's shared auth-state key file, the API key through the environment and a port picked
 * up front (so that another node's `--public-url` can name it before it listens).
 *
 * The network-namespace harness (nodes on machines of their own) is another helper; this one is
 * for what a process's life and death do to the cluster.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { eventually } from './server.js';
import { freePort } from './ports.js';
export { freePort };

const root = resolve(import.meta.dirname, '../..');

export interface NodeProcessOptions {
  name: string;
  databaseUrl: string;
  /** Parent directory; the node's data dir is `<dir>/<name>`. */
  dir: string;
  /** The auth-state key file every node shares. */
  secretKeyFile: string;
  apiKey: string;
  /** Port to listen on (`freePort()`); default one picked here. */
  port?: number;
  /** The cluster's public URL for `cdp_url` and live-view URLs; default the node's own. */
  publicUrl?: string;
  leaseSeconds?: number;
  drainSeconds?: number;
}

export interface NodeProcess {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Resolves with its exit code (null when a signal ended it). */
  readonly exited: Promise<number | null>;
  /** `fetch` with the API key. */
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
}

/** Start a node and wait until it listens and its readiness answers 200. */
export async function startNode(opts: NodeProcessOptions): Promise<NodeProcess> {
  const port = opts.port ?? (await freePort());
  const dataDir = join(opts.dir, opts.name);
  mkdirSync(dataDir, { recursive: true });
  const args = [
    '--import',
    'tsx',
    'src/cli/main.ts',
    'serve',
    ...['--port', String(port), '--data-dir', dataDir],
    ...['--cluster', opts.databaseUrl, '--node-name', opts.name],
    ...['--secret-key-file', opts.secretKeyFile],
    ...(opts.publicUrl ? ['--public-url', opts.publicUrl] : []),
  ];
  const child = spawn(process.execPath, args, {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      BURROW_API_KEY: opts.apiKey,
      BURROW_LEASE_SECONDS: String(opts.leaseSeconds ?? 3),
      BURROW_DRAIN_SECONDS: String(opts.drainSeconds ?? 30),
      // no pool but the tests' own: placement and drains are asserted node by node
      BURROW_WARM_POOL: '0',
      BURROW_LOG_LEVEL: 'warn',
    },
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
  const url = `http://127.0.0.1:${port}`;
  const node: NodeProcess = {
    name: opts.name,
    url,
    port,
    child,
    output: () => out,
    exited,
    api: (path, init = {}) => {
      const { json, headers, ...rest } = init;
      return fetch(url + path, {
        method: json === undefined ? (rest.method ?? 'GET') : (rest.method ?? 'POST'),
        ...rest,
        headers: {
          'x-api-key': opts.apiKey,
          ...(json !== undefined && { 'content-type': 'application/json' }),
          ...(headers as Record<string, string> | undefined),
        },
        ...(json !== undefined && { body: JSON.stringify(json) }),
      });
    },
  };
  let gone = false;
  void exited.then(() => (gone = true));
  try {
    await eventually(
      async () => {
        if (gone) throw new Error(`node ${opts.name} exited while starting:\n${out}`);
        const r = await fetch(`${url}/readyz`).catch(() => undefined);
        return r?.status === 200;
      },
      `node ${opts.name} ready`,
      45_000,
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${out}`, { cause: err });
  }
  return node;
}

/** Kill `node` (SIGKILL) if it still runs, and wait for its exit. */
export async function killNode(node: NodeProcess | undefined): Promise<void> {
  if (!node || node.child.exitCode !== null || node.child.signalCode !== null) return;
  node.child.kill('SIGKILL');
  await node.exited;
}
