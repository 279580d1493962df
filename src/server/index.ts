/**
 * `burrow-sandbox/server`: start a self-hosted Remote Instance Control Service.
 *
 * ```ts
 * await using server = await startServer({ port: 0 });
 * // server.url, server.apiKey
 * ```
 */
import { ClusterNode } from './cluster/node.js';
import { Forwarder } from './http/forward.js';
import { ProjectKeys } from './cluster/keys.js';
import { ClusterView } from './cluster/placement.js';
import { KeyScope } from './http/key-routes.js';
import { StartPlacement } from './http/start-placement.js';
import { Drain } from './cluster/drain.js';
import { StartRefusals } from './cluster/refusals.js';
import { serverError } from './errors.js';
import { Health } from './instances/health.js';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo, Socket } from 'node:net';
import { background } from '../internal/background.js';
import { pidAlive } from '../internal/process.js';
import { buildApp, createLogger, handleUpgrade } from './http/app.js';
import { ArtifactStore } from './artifacts/store.js';
import { AuthStore } from './auth-states/store.js';
import { ExtensionStore } from './extensions/store.js';
import { ProfileStore } from './profiles/store.js';
import { PostgresExtensions } from './cluster/extension-backend.js';
import { PostgresProfileBackend } from './cluster/profile-backend.js';
import { startRefusal } from './host/requirements.js';
import { DEFAULT_RESOLUTION, Registry } from './instances/registry.js';
import { MemoryInstanceStore } from './instances/store.js';
import type { RuntimeFactory } from './instances/runtime.js';
import { SandboxHost } from './sandbox/index.js';
import { ProfileTemplate } from './chromium/index.js';
import {
  ConfigError,
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
    counts(): { browser: number; ubuntu: number };
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

/** How long a drain lets instances run on when no cluster setting says (`cluster.drainSeconds`). */
const DEFAULT_DRAIN_MS = 300_000;

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

type BrowserModule = { createBrowserRuntime: RuntimeFactory };
type UbuntuModule = { createUbuntuRuntime: RuntimeFactory };

function runtimeFactories(): Record<'browser' | 'ubuntu', RuntimeFactory> {
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
  const cluster =
    config.cluster &&
    (await openCluster(config, logger, (why) => {
      // called by lease renewals (after join, so `health` and `registry` exist by then)
      if (!/taken by another run/.test(why)) {
        logger.warn({ why }, 'the cluster lease ran out without renewal; still trying');
        return;
      }
      logger.error(
        { why },
        'this node lost its place in the cluster (declared lost, or its name taken): its instances stop; restart it to rejoin',
      );
      health.lost();
      for (const r of registry.list()) {
        if (r.live) void registry.stop(r.id, 'node_lost').catch(() => {});
      }
    }));
  const authStore = new AuthStore(dataDir, {
    secretKeyFile: config.secretKeys.secretKeyFile,
    oldSecretKeyFiles: config.secretKeys.oldSecretKeyFiles,
    env: config.secretKeys.env,
    ...(cluster && { backend: cluster.authStates, shared: true }),
  });
  await authStore.ready; // states of 0.1 and of rotated-out keys re-encrypted
  // what another node saves or deletes shows here too
  await cluster?.authStates.watch((id) => void authStore.refresh(id).catch(() => {}));
  // and what it saved or deleted while this node did not listen (the database restarted)
  cluster?.db.onRelisten(() => void authStore.refreshAll().catch(() => {}));
  // uploaded browser extensions; half-written uploads of an earlier run are removed. On a
  // cluster node they are the cluster's, and the directory this node's cache of them
  const sharedExtensions = cluster && new PostgresExtensions(cluster.db);
  const extensions = new ExtensionStore(dataDir, {
    maxBytes: config.maxExtensionBytes,
    shared: sharedExtensions,
  });
  await extensions.ready;
  // an extension deleted through another node leaves this node's cache too
  await sharedExtensions?.watch((id) => void extensions.evict(id).catch(() => {}));
  // persistent browser profiles, sealed with the auth states' key (the cluster's, on a node)
  const profileBackend =
    cluster && new PostgresProfileBackend(cluster.db, { node: cluster.name, run: cluster.run });
  const profiles = new ProfileStore(dataDir, {
    keyring: authStore.keyring,
    maxBytes: config.maxProfileBytes,
    ...(profileBackend && { backend: profileBackend }),
  });
  await profiles.ready;
  const artifacts = new ArtifactStore({
    root: join(runDir, 'retained'),
    retentionMs: config.artifacts.retentionMs,
    maxRetainedBytes: config.artifacts.maxRetainedBytes,
    log: logger,
  });
  // each instance gets its artifacts (downloads, recordings), which outlive its processes
  const factories = withArtifacts(runtimeFactories(), artifacts);
  const iso = config.sandbox.isolation;
  const sandboxHost = await SandboxHost.create({
    runDir,
    log: logger,
    sandboxRoot: config.sandbox.root,
    bwrapPath: config.sandbox.bwrapPath,
    ...(iso.insecureNoIsolation !== undefined && { insecureNoIsolation: iso.insecureNoIsolation }),
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
  // readiness: this machine can start a sandbox (a self-test), and the server is not draining
  const health = new Health(sandboxHost, runDir, logger);
  // `/livez` names this run, so a join that probes this name's previous run tells the two apart
  if (cluster) health.run = cluster.run;
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
    store: cluster?.store ?? new MemoryInstanceStore({ journal: join(runDir, JOURNAL), earlier }),
    ...(cluster && {
      newId: () => cluster.newId(),
      // the others place starts by this node's free slots and warm pool: published on change
      changed: () => cluster.advertise(advert),
    }),
    admission: async () => {
      // a draining node takes no starts, nor warm-pool claims (drain.ts)
      if (health.draining) throw serverError('node_draining', { node: cluster?.name ?? host });
      await cluster?.admit();
    },
    warmPool,
    sandboxStock,
    stockPrepare: (sandbox): Promise<void> => template.seed(sandbox),
  });
  /** What this node can take now: free slots under its cap, and its warm pool. */
  const advert = () => ({
    capacity: maxInstances,
    freeSlots: Math.max(0, maxInstances - registry.liveCount),
    warm: registry.pooled,
  });
  // a node adopts its name's earlier rows only once its join proved the name is its own (a second
  // process given a live node's name must not end that node's instances)
  if (!cluster) await registry.adopt();
  else health.joining();
  const { maxConnectionsPerClient } = config;
  const forwarder = cluster && new Forwarder(cluster, cluster.clientSigner);
  const placement =
    cluster &&
    new StartPlacement({
      name: cluster.name,
      db: cluster.db,
      view: await ClusterView.open(cluster.db),
      local: advert,
      signer: cluster.clientSigner,
      clusterMax: config.cluster?.maxInstances,
      // a drain leaves this node out of its own placements at once, before the database says so
      draining: () => health.draining,
    });
  // starts refused here, counted for the autoscaler (cluster/refusals.ts)
  const refusals = cluster && new StartRefusals(cluster.db, cluster.name);
  // keys of projects live in the cluster's database; the server's own key stays the admin's
  const keys = cluster && new KeyScope(await ProjectKeys.open(cluster.db), authStore);
  let drained!: () => void;
  const drainedPromise = new Promise<void>((resolve) => (drained = resolve));
  const drain = new Drain({
    registry,
    health,
    cluster: cluster || undefined,
    deadlineMs: config.cluster?.drainMs ?? DEFAULT_DRAIN_MS,
    log: logger,
    close: async () => {
      await close(); // defined below, called only once the server runs
      drained();
    },
  });
  const app = await buildApp({
    apiKey,
    registry,
    authStore,
    maxUploadBytes,
    logger,
    chromiumPath,
    extensions,
    profiles,
    mcp: config.mcp,
    ...(maxConnectionsPerClient !== undefined && { maxConnectionsPerClient }),
    forwarder,
    placement,
    keys,
    ...(refusals && { refusedStart: (status: number) => refusals.count(status) }),
    ...(cluster && { forwardedClient: (req) => cluster.clientSigner.clientOf(req) }),
    health,
    drain: () => {
      void drain.start();
      return drain.deadline!;
    },
  });
  app.server.on('upgrade', (req, socket, head) => {
    const local = () => handleUpgrade(registry, req, socket, head);
    if (forwarder) forwarder.upgrade(req, socket, head, local);
    else local();
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
  if (cluster && !config.publicUrl) {
    // any node forwards a cdp_url to its owner, but clients should not need to know the nodes
    logger.warn(
      { url },
      'cluster mode without --public-url: cdp_url and stream_url carry this node’s own address',
    );
  }
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      health.closing();
      artifacts.closing(); // the retained files go with the run directory
      // a profile template still being made is cut short: the stock's fill waits for it
      await Promise.all([template.close(), registry.close()]);
      await profileBackend?.settled(); // the stopped instances' profiles released
      await artifacts.close();
      await app.close();
      await forwarder?.close();
      await placement?.close();
      await refusals?.close();
      await cluster?.close();
      await sandboxHost.close();
      await rm(runDir, { recursive: true, force: true });
    })());
  // a node takes its slot (the ids it mints) once others can reach it; refused (its name held
  // by a live node), everything started so far is closed again, so the process can exit
  try {
    await cluster?.join({ url: config.cluster?.nodeUrl ?? url, ...advert() });
    if (cluster) {
      await registry.adopt();
      health.joined();
    }
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
  // instances never reach burrow's own port, whatever the operator allows on loopback
  sandboxHost.protectedPorts = () => [address.port];
  // nor the cluster's database and nodes, wherever they are
  if (cluster) sandboxHost.refusedEndpoints = () => cluster.endpoints();
  registry.startPool();
  // a node is ready once it proved it can start a sandbox; a single server tests on first ask
  if (cluster) void health.selfTest();

  return {
    url,
    apiKey,
    clustered: Boolean(cluster),
    drain: () => drain.start(),
    drained: drainedPromise,
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

/** This server as a node of its cluster (`--cluster`); refuses a node without a shared key. */
async function openCluster(
  config: ServerConfig,
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void },
  onLost: (why: string) => void,
): Promise<ClusterNode> {
  const c = config.cluster!;
  const keys = config.secretKeys;
  if (!keys.secretKeyFile && !keys.env.BURROW_SECRET_KEY && !keys.env.BURROW_SECRET_KEY_FILE) {
    throw new ConfigError(
      'cluster mode needs the auth-state key every node shares: give --secret-key-file (or BURROW_SECRET_KEY_FILE) the same 32-byte key on each node',
    );
  }
  return ClusterNode.open({
    databaseUrl: c.databaseUrl,
    nodeName: c.nodeName,
    leaseMs: c.leaseMs,
    log,
    onLost,
  });
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
