/**
 * `burrow-sandbox/server`: start a self-hosted Remote Instance Control Service.
 *
 * ```ts
 * await using server = await startServer({ port: 0 });
 * // server.url, server.apiKey
 * ```
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir, totalmem } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo, Socket } from 'node:net';
import { background } from '../internal/background.js';
import { pidAlive } from '../internal/process.js';
import { buildApp, createLogger, handleUpgrade } from './http/app.js';
import { ArtifactStore, DEFAULT_ARTIFACT_RETENTION_MS } from './artifacts/store.js';
import { AuthStore } from './auth-states/store.js';
import { startRefusal } from './host/requirements.js';
import { Registry, type WarmPoolSizes } from './instances/registry.js';
import { MemoryInstanceStore } from './instances/store.js';
import type { RuntimeFactory } from './instances/runtime.js';
import { SandboxHost } from './sandbox/index.js';

export interface ServerOptions {
  /** Interface to bind. Default `127.0.0.1` (loopback only); env `BURROW_HOST`. */
  host?: string;
  /** TCP port; `0` picks a free one. Default `8787`; env `BURROW_PORT`. */
  port?: number;
  /** The API key clients send in `x-api-key`. Default env `BURROW_API_KEY`, else a random one. */
  apiKey?: string;
  /** Where auth states and instance directories live. Default env `BURROW_DATA_DIR`, else `$XDG_DATA_HOME/burrow` or `~/.local/share/burrow`. */
  dataDir?: string;
  /** Live instances allowed at once; past it `start` answers 429. Default 8; env `BURROW_MAX_INSTANCES`. */
  maxInstances?: number;
  /** Largest upload in bytes; past it 413. Default 100 MiB; env `BURROW_MAX_UPLOAD_BYTES`. */
  maxUploadBytes?: number;
  /** Chromium binary. Default env `BURROW_CHROMIUM`, else `/usr/lib/chromium/chromium`. */
  chromiumPath?: string;
  /** Base URL put into `cdp_url` and `stream_url`. Default `http://<host>:<port>` (loopback when bound to all interfaces). */
  publicUrl?: string;
  /** pino log level. Default `warn`; env `BURROW_LOG_LEVEL`. */
  logLevel?: string;
  /** Where log lines go. Default stdout (`burrow mcp` on stdio sends them to stderr). */
  logDestination?: { write(line: string): void };
  /** How instances are isolated (ISOLATION.md in src/server/sandbox/). */
  isolation?: IsolationOptions;
  /**
   * Authenticated connections per client address; past it 429. 0 = no cap. Default 64; env
   * `BURROW_MAX_CONNECTIONS_PER_CLIENT`. Connections that have not authenticated yet have a
   * smaller budget of their own (src/server/http/limits.ts).
   */
  maxConnectionsPerClient?: number;
  /**
   * Instances kept started ahead of demand, per type (src/server/instances/pool.ts): a number means that
   * many `browser` instances. They count against `maxInstances`. Default none; env
   * `BURROW_WARM_POOL` (`2`, or `browser=2,ubuntu=1`).
   */
  warmPool?: number | WarmPoolSizes;
  /**
   * File holding the key that encrypts auth states at rest (src/server/auth-states/secret-key.ts). Default
   * env `BURROW_SECRET_KEY`, else `BURROW_SECRET_KEY_FILE`, else `<dataDir>/secret-key`
   * (generated once, mode 0600).
   */
  secretKeyFile?: string;
  /** Files holding older keys, read only: their states are re-encrypted at start (rotation). */
  oldSecretKeyFiles?: string[];
  /**
   * Seconds an instance's downloads and recordings stay fetchable after it stopped (src/server/
   * artifacts.ts); 0 drops them with the instance. Default 3600; env
   * `BURROW_ARTIFACT_RETENTION_SECONDS`.
   */
  artifactRetentionSeconds?: number;
}

/** `2` → two browser instances; `browser=2,ubuntu=1` → both. Throws on anything else. */
export function parseWarmPool(text: string): WarmPoolSizes {
  const t = text.trim();
  if (/^\d+$/.test(t)) return { browser: Number(t) };
  const sizes: WarmPoolSizes = {};
  for (const part of t.split(',')) {
    const m = /^\s*(browser|ubuntu)\s*=\s*(\d+)\s*$/.exec(part);
    if (!m) {
      throw new Error(
        `a warm pool is a number of browser instances or "browser=N,ubuntu=M", not "${text}"`,
      );
    }
    sizes[m[1] as 'browser' | 'ubuntu'] = Number(m[2]);
  }
  return sizes;
}

export interface IsolationOptions {
  /** Instances' browsers may reach every host loopback port but burrow's own. Default false. */
  allowHostLoopback?: boolean;
  /** Host loopback ports instances' browsers may reach. Default none. */
  allowHostPorts?: number[];
  /** Start instances even when this machine cannot isolate them (they then run unisolated). */
  insecureNoIsolation?: boolean;
  /** Run instances unisolated even where isolation works (benchmarks of its cost; tests). */
  disable?: boolean;
  /** Memory limit per instance in bytes. Default 2 GiB. */
  memoryBytes?: number;
  /** Processes and threads per instance. Default 1024. */
  pids?: number;
  /** CPU time per instance, in cores. Default 1. */
  cpus?: number;
  /** Disk quota per instance in bytes. Default 4 GiB. */
  diskBytes?: number;
}

export interface RunningServer extends AsyncDisposable {
  /** Base URL of the API, e.g. `http://127.0.0.1:8787`. */
  readonly url: string;
  readonly apiKey: string;
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  /** The warm pool: how many instances wait in it now, and a promise of it being full. */
  readonly warmPool: {
    counts(): { browser: number; ubuntu: number };
    /** Ids of the instances waiting in it (they are not listed by the API until claimed). */
    ids(): string[];
    /** Resolves once the pool holds what it should (or what the instance cap leaves room for). */
    ready(): Promise<void>;
  };
  /** Stop every instance, then stop listening. Idempotent. */
  close(): Promise<void>;
}

export function defaultDataDir(): string {
  if (process.env.BURROW_DATA_DIR) return process.env.BURROW_DATA_DIR;
  const base = process.env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  return join(base, 'burrow');
}

const envNumber = (name: string): number | undefined => {
  const v = process.env[name];
  return v !== undefined && v !== '' && Number.isFinite(Number(v)) ? Number(v) : undefined;
};

/**
 * Removes instance directories of earlier server runs whose process is gone; returns their
 * journals' text (what they say about the instances they ran: instances/store.ts).
 */
async function sweepRuns(instancesRoot: string): Promise<string[]> {
  const journals: string[] = [];
  for (const run of await readdir(instancesRoot).catch(() => [] as string[])) {
    const dir = join(instancesRoot, run);
    const pid = Number(await readFile(join(dir, 'owner.pid'), 'utf8').catch(() => 'NaN'));
    if (!Number.isInteger(pid) || !pidAlive(pid)) {
      journals.push(await readFile(join(dir, JOURNAL), 'utf8').catch(() => ''));
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    }
  }
  return journals;
}

const JOURNAL = 'instances.jsonl';

/** Runtimes are loaded on first use. */
/** The factories with each instance's context given its artifacts (artifacts/store.ts). */
function withArtifacts(
  factories: Record<'browser' | 'ubuntu', RuntimeFactory>,
  store: ArtifactStore,
): Record<'browser' | 'ubuntu', RuntimeFactory> {
  const wrap =
    (f: RuntimeFactory): RuntimeFactory =>
    (ctx) =>
      f({ ...ctx, artifacts: store.forInstance(ctx.id) });
  return { browser: wrap(factories.browser), ubuntu: wrap(factories.ubuntu) };
}

function runtimeFactories(): Record<'browser' | 'ubuntu', RuntimeFactory> {
  return {
    browser: async (ctx) => (await import('./browser/index.js')).createBrowserRuntime(ctx),
    ubuntu: async (ctx) => (await import('./ubuntu/index.js')).createUbuntuRuntime(ctx),
  };
}

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const host = options.host ?? process.env.BURROW_HOST ?? '127.0.0.1';
  const port = options.port ?? envNumber('BURROW_PORT') ?? 8787;
  const apiKey =
    options.apiKey || process.env.BURROW_API_KEY || `bk_${randomBytes(24).toString('base64url')}`;
  if (apiKey.length < 8) throw new Error('The API key must be at least 8 characters long');
  const dataDir = options.dataDir ?? defaultDataDir();
  const maxUploadBytes =
    options.maxUploadBytes ?? envNumber('BURROW_MAX_UPLOAD_BYTES') ?? 100 * 1024 * 1024;
  const chromiumPath =
    options.chromiumPath ?? process.env.BURROW_CHROMIUM ?? '/usr/lib/chromium/chromium';
  const logLevel = options.logLevel ?? process.env.BURROW_LOG_LEVEL ?? 'warn';

  const retentionSeconds =
    options.artifactRetentionSeconds ??
    envNumber('BURROW_ARTIFACT_RETENTION_SECONDS') ??
    DEFAULT_ARTIFACT_RETENTION_MS / 1000;
  const instancesRoot = join(dataDir, 'instances');
  await mkdir(instancesRoot, { recursive: true, mode: 0o700 });
  const earlier = await sweepRuns(instancesRoot);
  const runDir = join(instancesRoot, `run-${process.pid}-${randomBytes(4).toString('hex')}`);
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  await writeFile(join(runDir, 'owner.pid'), String(process.pid));

  let publicUrl = options.publicUrl ?? '';
  const authStore = new AuthStore(dataDir, {
    secretKeyFile: options.secretKeyFile,
    oldSecretKeyFiles: options.oldSecretKeyFiles,
  });
  await authStore.ready; // states of 0.1 and of rotated-out keys re-encrypted
  const logger = createLogger(logLevel, {
    secrets: [apiKey],
    ...(options.logDestination && { destination: options.logDestination }),
  });
  const artifacts = new ArtifactStore({
    root: join(runDir, 'retained'),
    retentionMs: Math.max(0, retentionSeconds) * 1000,
    log: logger,
  });
  // each instance gets its artifacts (downloads, recordings), which outlive its processes
  const factories = withArtifacts(runtimeFactories(), artifacts);
  const iso = options.isolation ?? {};
  const sandboxHost = await SandboxHost.create({
    runDir,
    log: logger,
    ...(iso.insecureNoIsolation !== undefined && { insecureNoIsolation: iso.insecureNoIsolation }),
    ...(iso.allowHostLoopback !== undefined && { allowHostLoopback: iso.allowHostLoopback }),
    ...(iso.disable && { disableIsolation: true }),
    ...(iso.allowHostPorts !== undefined && { allowHostPorts: iso.allowHostPorts }),
    limits: {
      ...(iso.memoryBytes !== undefined && { memoryBytes: iso.memoryBytes }),
      ...(iso.pids !== undefined && { pids: iso.pids }),
      ...(iso.cpus !== undefined && { cpus: iso.cpus }),
      ...(iso.diskBytes !== undefined && { diskBytes: iso.diskBytes }),
    },
  });
  const maxInstances = options.maxInstances ?? envNumber('BURROW_MAX_INSTANCES') ?? 8;
  const warmPool = warmPoolSizes(options.warmPool);
  checkCapacity(maxInstances, warmPool, sandboxHost.limits.memoryBytes, logger);
  const registry = new Registry({
    instancesDir: runDir,
    maxInstances,
    factories,
    requirementsRefusal: (type) => startRefusal(type, { chromiumPath }),
    publicUrl: () => publicUrl,
    chromiumPath,
    maxUploadBytes,
    log: logger,
    sandboxHost,
    store: new MemoryInstanceStore({ journal: join(runDir, JOURNAL), earlier }),
    warmPool,
  });
  await registry.adopt();
  const maxConnectionsPerClient =
    options.maxConnectionsPerClient ?? envNumber('BURROW_MAX_CONNECTIONS_PER_CLIENT');
  const app = await buildApp({
    apiKey,
    registry,
    authStore,
    maxUploadBytes,
    logger,
    chromiumPath,
    ...(maxConnectionsPerClient !== undefined && { maxConnectionsPerClient }),
  });
  app.server.on('upgrade', (req, socket, head) => handleUpgrade(registry, req, socket, head));
  await app.listen({ host, port });
  // an embedded server's socket and connections never hold the process alone (background.ts)
  background(app.server);
  app.server.on('connection', (socket: Socket) => background(socket));
  const address = app.server.address() as AddressInfo;
  const urlHost = (h: string) => (h.includes(':') ? `[${h}]` : h);
  const wildcard = host === '0.0.0.0' || host === '::';
  const url = `http://${urlHost(wildcard ? '127.0.0.1' : host)}:${address.port}`;
  publicUrl ||= url;
  // instances never reach burrow's own port, whatever the operator allows on loopback
  sandboxHost.protectedPorts = () => [address.port];
  registry.startPool();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      artifacts.closing(); // the retained files go with the run directory
      await registry.close();
      await artifacts.close();
      await app.close();
      await sandboxHost.close();
      await rm(runDir, { recursive: true, force: true });
    })());
  return {
    url,
    apiKey,
    host,
    port: address.port,
    dataDir,
    warmPool: {
      counts: () => registry.pooled,
      ids: () => registry.pooledIds(),
      ready: () => registry.poolReady(),
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

function warmPoolSizes(option: number | WarmPoolSizes | undefined): WarmPoolSizes {
  if (typeof option === 'number') return { browser: option };
  if (option) return option;
  const env = process.env.BURROW_WARM_POOL;
  return env ? parseWarmPool(env) : {};
}

/**
 * The instance cap, the warm pool and the memory limit should agree: the pool lives inside the
 * cap (a larger one is only filled up to it), and memory limits are ceilings, not reservations,
 * so a cap whose limits add up past this machine's memory relies on instances staying below
 * them (an idle browser instance uses about 170 MiB; bench/density.ts measures it).
 */
function checkCapacity(
  maxInstances: number,
  pool: WarmPoolSizes,
  memoryBytes: number | null,
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void },
): void {
  const pooled = (pool.browser ?? 0) + (pool.ubuntu ?? 0);
  if (pooled > maxInstances) {
    log.warn(
      { warmPool: pool, maxInstances },
      `the warm pool (${pooled}) is larger than the instance cap (${maxInstances}): it holds at most ${maxInstances}, and fewer while instances are in use`,
    );
  }
  if (memoryBytes && maxInstances * memoryBytes > totalmem()) {
    const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;
    log.info(
      { maxInstances, memoryBytes },
      `${maxInstances} instances × ${gib(memoryBytes)} memory limit = ${gib(maxInstances * memoryBytes)}, more than this machine's ${gib(totalmem())}: the limits are ceilings, so this relies on instances staying below them`,
    );
  }
}
