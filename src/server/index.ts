/**
 * `burrow-sandbox/server`: start a self-hosted Remote Instance Control Service.
 *
 * ```ts
 * await using server = await startServer({ port: 0 });
 * // server.url, server.apiKey
 * ```
 */
import { compose, type ServerParts } from './cluster/compose.js';
import { Drain } from './cluster/drain.js';
import { serverError } from './errors.js';
import { Health } from './instances/health.js';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo, Socket } from 'node:net';
import type { RunnableInstanceType } from '../api/index.js';
import { background } from '../internal/background.js';
import type { Logger } from '../internal/log.js';
import { pidAlive } from '../internal/process.js';
import { buildApp, createLogger } from './http/app.js';
import { ArtifactStore } from './artifacts/store.js';
import { AuthStore } from './auth-states/store.js';
import { ExtensionStore } from './extensions/store.js';
import { ProfileStore } from './profiles/store.js';
import { startRefusal } from './host/requirements.js';
import { DEFAULT_RESOLUTION, Registry } from './instances/registry.js';
import { withServices, type RuntimeFactory } from './instances/runtime.js';
import { SandboxHost } from './sandbox/index.js';
import { ProfileTemplate } from './chromium/index.js';
import {
  resolveServerConfig,
  type ServerConfig,
  type ServerOptions,
  type WarmPoolSizes,
} from './config.js';

export {
  ConfigError,
  defaultDataDir,
  parseWarmPool,
  resolveServerConfig,
  type IsolationOptions,
  type ServerConfig,
  type ServerOptions,
} from './config.js';

export interface RunningServer extends AsyncDisposable {
  /** Base URL of the API, e.g. `http://127.0.0.1:8787`. */
  readonly url: string;
  readonly apiKey: string;
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  /** The warm pool: how many instances wait in it now, and a promise of it being full. */
  readonly warmPool: {
    counts(): Record<RunnableInstanceType, number>;
    /** Ids of the instances waiting in it (they are not listed by the API until claimed). */
    ids(): string[];
    /** Resolves once the pool holds what it should (or what the instance cap leaves room for). */
    ready(): Promise<void>;
  };
  /**
   * Sandboxes made ahead (sandbox/stock.ts): the instance ids of those ready now (no client is
   * shown them before a start answers with one), and a promise of a full stock.
   */
  readonly sandboxStock: {
    ids(): string[];
    ready(): Promise<void>;
  };
  /** Stop every instance, then stop listening. Idempotent. */
  close(): Promise<void>;
  /** Whether this server is a node of a cluster (`--cluster`). */
  readonly clustered: boolean;
  /**
   * Drain (cluster/drain.ts): no new instances, readiness false, the running ones go on until they end
   * or the drain deadline; then close. Resolves once closed. Idempotent.
   */
  drain(): Promise<void>;
  /** Resolves when a drain, begun here or by `POST /v1/node/drain`, has closed the server. */
  readonly drained: Promise<void>;
}

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
  factories: Record<RunnableInstanceType, RuntimeFactory>,
  store: ArtifactStore,
): Record<RunnableInstanceType, RuntimeFactory> {
  const wrap =
    (f: RuntimeFactory): RuntimeFactory =>
    (ctx) =>
      f(
        withServices(ctx, {
          artifacts: store.forInstance(ctx.instance.id, ctx.services.log),
        }),
      );
  return { browser: wrap(factories.browser), ubuntu: wrap(factories.ubuntu) };
}

type BrowserModule = { createBrowserRuntime: RuntimeFactory };
type UbuntuModule = { createUbuntuRuntime: RuntimeFactory };

function runtimeFactories(): Record<RunnableInstanceType, RuntimeFactory> {
  // loaded at the first start of the type, and kept: a loader with hooks (tsx) answers even a
  // cached module's import through its own thread, which a busy machine delays by tens of ms
  let browser: Promise<BrowserModule> | undefined;
  let ubuntu: Promise<UbuntuModule> | undefined;
  return {
    browser: async (ctx) =>
      (await (browser ??= import('./browser/index.js'))).createBrowserRuntime(ctx),
    ubuntu: async (ctx) =>
      (await (ubuntu ??= import('./ubuntu/index.js'))).createUbuntuRuntime(ctx),
  };
}

/**
 * The stores of what users keep (auth states, uploaded extensions, persistent profiles), each
 * ready: on a single server files under the data dir; on a cluster node the cluster's tables,
 * which each store follows from then on (`parts`, cluster/compose.ts).
 */
async function openStores(config: ServerConfig, parts: ServerParts) {
  const { dataDir } = config;
  const authStore = new AuthStore(dataDir, {
    secretKeyFile: config.secretKeys.secretKeyFile,
    oldSecretKeyFiles: config.secretKeys.oldSecretKeyFiles,
    env: config.secretKeys.env,
    projectCaps: config.storeCaps.authStates,
    ...parts.authStates,
  });
  await authStore.ready; // states of 0.1 and of rotated-out keys re-encrypted
  await parts.followAuthStates(authStore);
  // uploaded browser extensions; half-written uploads of an earlier run are removed. On a
  // cluster node they are the cluster's, and the directory this node's cache of them
  const extensions = new ExtensionStore(dataDir, {
    maxBytes: config.maxExtensionBytes,
    caps: config.storeCaps.extensions,
    shared: parts.extensions,
  });
  await extensions.ready;
  await parts.followExtensions(extensions);
  // persistent browser profiles, sealed with the auth states' key (the cluster's, on a node)
  const profiles = new ProfileStore(dataDir, {
    keyring: authStore.keyring,
    maxBytes: config.maxProfileBytes,
    readBackBytes: config.maxProfileBytesReadBack,
    caps: config.storeCaps.profiles,
    backend: parts.profiles,
  });
  await profiles.ready;
  return { authStore, extensions, profiles };
}

/** The sandbox layer every instance is built with, from the isolation settings. */
function createSandboxHost(
  config: ServerConfig,
  runDir: string,
  log: Logger,
): Promise<SandboxHost> {
  const iso = config.sandbox.isolation;
  return SandboxHost.create({
    runDir,
    log,
    sandboxRoot: config.sandbox.root,
    bwrapPath: config.sandbox.bwrapPath,
    ...(iso.insecureNoIsolation !== undefined && { insecureNoIsolation: iso.insecureNoIsolation }),
    ...(iso.allowUnlimited !== undefined && { allowUnlimited: iso.allowUnlimited }),
    ...(iso.allowHostLoopback !== undefined && { allowHostLoopback: iso.allowHostLoopback }),
    ...(iso.disable && { disableIsolation: true }),
    ...(iso.allowHostPorts !== undefined && { allowHostPorts: iso.allowHostPorts }),
    ...(iso.allowNetworks !== undefined && { allowNetworks: iso.allowNetworks }),
    limits: {
      ...(iso.memoryBytes !== undefined && { memoryBytes: iso.memoryBytes }),
      ...(iso.pids !== undefined && { pids: iso.pids }),
      ...(iso.cpus !== undefined && { cpus: iso.cpus }),
      ...(iso.diskBytes !== undefined && { diskBytes: iso.diskBytes }),
    },
  });
}

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  // every setting, checked once (config.ts); the rooms below get their parts of it
  const config = resolveServerConfig(
    options,
    process.env,
    () => `bk_${randomBytes(24).toString('base64url')}`,
  );
  const { host, apiKey, dataDir, programs } = config;
  const chromiumPath = programs.chromium;
  const instancesRoot = join(dataDir, 'instances');
  await mkdir(instancesRoot, { recursive: true, mode: 0o700 });
  const earlier = await sweepRuns(instancesRoot);
  const runDir = join(instancesRoot, `run-${process.pid}-${randomBytes(4).toString('hex')}`);
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  await writeFile(join(runDir, 'owner.pid'), String(process.pid));

  let publicUrl = config.publicUrl ?? '';
  const logger = createLogger(config.logLevel, {
    secrets: [apiKey],
    ...(options.logDestination && { destination: options.logDestination }),
  });
  // alone, the single-node defaults; with --cluster, the cluster's parts (cluster/compose.ts)
  const parts = await compose(config, { log: logger, journal: join(runDir, JOURNAL), earlier });
  const { authStore, extensions, profiles } = await openStores(config, parts);
  const artifacts = new ArtifactStore({
    root: join(runDir, 'retained'),
    retentionMs: config.artifacts.retentionMs,
    maxRetainedBytes: config.artifacts.maxRetainedBytes,
    maxDownloads: config.artifacts.maxDownloads,
    log: logger,
  });
  // each instance gets its artifacts (downloads, recordings), which outlive its processes
  const factories = withArtifacts(runtimeFactories(), artifacts);
  const sandboxHost = await createSandboxHost(config, runDir, logger);
  // readiness: this machine can start a sandbox (a self-test), and the server is not draining
  const health = new Health(sandboxHost, runDir, logger);
  const { maxInstances, maxUploadBytes, warmPool, sandboxStock } = config;
  checkCapacity(maxInstances, warmPool, sandboxHost.limits.memoryBytes, logger);
  // every sandbox made ahead gets a fresh Chromium profile's skeleton (chromium/profile-template.ts)
  const template = new ProfileTemplate({
    host: sandboxHost,
    mint: (): string => registry.mintId(),
    dirOf: (id) => join(runDir, id),
    chromiumPath,
    chromiumFlags: programs.chromiumFlags,
    windowSize: DEFAULT_RESOLUTION,
    log: logger,
  });
  const registry = new Registry({
    instancesDir: runDir,
    maxInstances,
    factories,
    requirementsRefusal: (type) =>
      startRefusal(type, {
        chromiumPath,
        xvfbPath: programs.xvfb,
        x11vncPath: programs.x11vnc,
      }),
    publicUrl: () => publicUrl,
    chromiumPath,
    programs,
    maxUploadBytes,
    log: logger,
    sandboxHost,
    store: parts.store,
    ...parts.registry,
    admission: async () => {
      // a draining node takes no starts, nor warm-pool claims (drain.ts)
      if (health.draining) throw serverError('node_draining', { node: parts.name });
      await parts.admit();
    },
    warmPool,
    sandboxStock,
    stockPrepare: (sandbox): Promise<void> => template.seed(sandbox),
  });
  await parts.open({ registry, health, sandboxHost });
  const drain = new Drain({
    registry,
    health,
    cluster: parts,
    deadlineMs: parts.drainMs,
    log: logger,
    close: () => close(), // defined below, called only once the server runs
  });
  const app = await buildApp({
    apiKey,
    registry,
    authStore,
    maxUploadBytes,
    logger,
    chromiumPath,
    maxAuthStateBytes: config.storeCaps.authStates.stateBytes,
    extensions,
    profiles,
    mcp: config.mcp,
    maxConnectionsPerClient: config.maxConnectionsPerClient,
    cluster: parts.http,
    health,
    drain: () => {
      void drain.start();
      return drain.deadline!;
    },
  });
  await app.listen({ host, port: config.port });
  // an embedded server's socket and connections never hold the process alone (background.ts)
  background(app.server);
  app.server.on('connection', (socket: Socket) => background(socket));
  const address = app.server.address() as AddressInfo;
  const urlHost = (h: string) => (h.includes(':') ? `[${h}]` : h);
  const wildcard = host === '0.0.0.0' || host === '::';
  const url = `http://${urlHost(wildcard ? '127.0.0.1' : host)}:${address.port}`;
  publicUrl ||= url;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      health.closing();
      artifacts.closing(); // the retained files go with the run directory
      // a profile template still being made is cut short: the stock's fill waits for it
      await Promise.all([template.close(), registry.close()]);
      await parts.released(); // the stopped instances' profiles released
      await artifacts.close();
      await app.close(); // and the cluster's plug-in: its forwarding and placement
      await parts.close();
      await sandboxHost.close();
      await rm(runDir, { recursive: true, force: true });
    })());
  // a node takes its slot (the ids it mints) once others can reach it; refused (its name held
  // by a live node), everything started so far is closed again, so the process can exit
  try {
    await parts.listening(url);
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
  // instances never reach burrow's own port, whatever the operator allows on loopback
  sandboxHost.protectedPorts = () => [address.port];
  registry.startPool();

  return {
    url,
    apiKey,
    clustered: parts.clustered,
    drain: () => drain.start(),
    drained: drain.drained,
    host,
    port: address.port,
    dataDir,
    warmPool: {
      counts: () => registry.pooled,
      ids: () => registry.pooledIds(),
      ready: () => registry.poolReady(),
    },
    sandboxStock: { ids: () => registry.stockedIds(), ready: () => registry.stockReady() },
    close,
    [Symbol.asyncDispose]: close,
  };
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
