/**
 * What a server is made of beyond its own machine, composed once: alone, the defaults (its rows
 * in a journal on disk, its auth states, extensions and profiles in files, ids of its own); as a
 * node of a cluster (`--cluster`), the cluster's parts (the database, its shared stores, ids that
 * name their node, the lease and the watch on the other nodes) and what the HTTP side of a node
 * adds (../http/cluster/: forwarding, placement, keys of projects).
 *
 * The composition root (../index.ts) asks the same questions of both and never which one it
 * has: the single server is what it mostly is, and the cluster plugs into the seams it already
 * has (the stores' backends, the registry's ids and admission, the app's plug-in).
 */
import { ConfigError, type ServerConfig } from '../config.js';
import type { AuthStore, AuthStoreOptions } from '../auth-states/store.js';
import type { ExtensionStore } from '../extensions/store.js';
import type { Health } from '../instances/health.js';
import type { Registry } from '../instances/registry.js';
import { MemoryInstanceStore, type InstanceStore } from '../instances/store.js';
import type { SandboxHost } from '../sandbox/index.js';
import type { Logger } from '../../internal/log.js';
import { PostgresExtensions } from './extension-backend.js';
import { ProjectKeys } from './keys.js';
import { ClusterNode } from './node.js';
import type { NodeAdvert } from './nodes.js';
import { ClusterView } from './placement.js';
import { PostgresProfileBackend } from './profile-backend.js';
import { StartRefusals } from './refusals.js';

/** How long a drain lets instances run on when no cluster setting says (`cluster.drainSeconds`). */
const DEFAULT_DRAIN_MS = 300_000;

/** What the parts are told once the server's own are made (`ServerParts.open`). */
export interface ServerSide {
  registry: Registry;
  health: Health;
  sandboxHost: SandboxHost;
}

/**
 * What the HTTP side of a node is made from (../http/cluster/plugin.ts): the node (routes, the
 * signer of forwarded clients), the view placement reads, the keys of projects and the count
 * of refused starts.
 */
export interface ClusterHttpParts {
  readonly node: ClusterNode;
  readonly view: ClusterView;
  readonly keys: ProjectKeys;
  readonly refusals: StartRefusals;
  /** The cluster-wide cap of live instances, if any. */
  readonly clusterMax: number | undefined;
  /** This node's own numbers, read now (its registry's). */
  local(): Omit<NodeAdvert, 'url'>;
}

/** The parts a server is composed of besides its machine: alone or as a node of a cluster. */
export interface ServerParts {
  /** Whether this server is a node of a cluster. */
  readonly clustered: boolean;
  /** The name a refusal gives this server (`node_draining`): its node name, or its host. */
  readonly name: string;
  /** The run `/livez` names: a node's, so that a join tells this run from its name's last one. */
  readonly run: string | undefined;
  /** Where the instance rows are kept: this run's journal, or the cluster's table. */
  readonly store: InstanceStore;
  /**
   * The auth states' backend on a node (shared by every node); alone, the store's files. And the
   * store's own caps: alone it is one project's, so the project's caps (under the total); a
   * node's holds every project's, each capped by its key (../http/cluster/keys.ts), so the total.
   */
  readonly authStates: Pick<AuthStoreOptions, 'backend' | 'shared' | 'caps'>;
  /** Uploaded extensions shared by the nodes; alone, none (the store's files). */
  readonly extensions: PostgresExtensions | undefined;
  /** The profiles' table on a node; alone, none (one file per profile). */
  readonly profiles: PostgresProfileBackend | undefined;
  /** How long a drain lets instances run on. */
  readonly drainMs: number;
  /** What the HTTP side of a node is made from; alone, nothing (the app has no plug-in). */
  readonly http: ClusterHttpParts | undefined;
  /** The registry's ids and what it tells of a change (a node's advert); alone, its own. */
  readonly registry: { newId?: () => string; changed?: () => void };
  /** Whether a start may begin besides the drain (a node's database answers). */
  admit(): Promise<void>;
  /** What other nodes save or delete shows in `store` too. */
  followAuthStates(store: AuthStore): Promise<void>;
  /** An extension deleted through another node leaves this node's cache too. */
  followExtensions(store: ExtensionStore): Promise<void>;
  /** The server's own parts exist; before it listens. */
  open(server: ServerSide): Promise<void>;
  /** The server listens at `url`: a node joins its cluster (refused, it throws). */
  listening(url: string): Promise<void>;
  /** The drain began: a node is marked draining in its cluster. */
  drain(): Promise<void>;
  /** The instances have stopped: their profiles are released. */
  released(): Promise<void>;
  /** After the app closed: leave the cluster. Idempotent. */
  close(): Promise<void>;
}

export interface ComposeOptions {
  log: Logger;
  /** Where this run's instance rows are journaled alone, and the journals of earlier runs. */
  journal: string;
  earlier: readonly string[];
}

/** The parts of `config`'s server: the single-node defaults, or a node of its cluster. */
export async function compose(config: ServerConfig, opts: ComposeOptions): Promise<ServerParts> {
  return config.cluster
    ? ClusterParts.open(config, opts.log)
    : new SingleServer(
        config,
        new MemoryInstanceStore({ journal: opts.journal, earlier: opts.earlier }),
      );
}

/** One server alone: what it needs it has in itself. */
class SingleServer implements ServerParts {
  readonly clustered = false;
  readonly name: string;
  readonly run = undefined;
  readonly store: InstanceStore;
  readonly authStates: Pick<AuthStoreOptions, 'caps'>;
  readonly extensions = undefined;
  readonly profiles = undefined;
  readonly drainMs = DEFAULT_DRAIN_MS;
  readonly http = undefined;
  readonly registry = {};

  constructor(config: ServerConfig, store: InstanceStore) {
    this.name = config.host;
    const caps = config.storeCaps.authStates;
    this.authStates = {
      caps: { count: caps.count, bytes: Math.min(caps.bytes, caps.totalBytes) },
    };
    this.store = store;
  }

  async admit(): Promise<void> {}
  async followAuthStates(): Promise<void> {}
  async followExtensions(): Promise<void> {}

  /** Its earlier runs' rows are its own: adopted before anyone can ask for them. */
  async open({ registry }: ServerSide): Promise<void> {
    await registry.adopt();
  }

  async listening(): Promise<void> {}
  async drain(): Promise<void> {}
  async released(): Promise<void> {}
  async close(): Promise<void> {}
}

/** A node of a cluster (`--cluster`). */
class ClusterParts implements ServerParts {
  readonly clustered = true;
  readonly #node: ClusterNode;
  readonly #config: ServerConfig;
  readonly #log: Logger;
  readonly extensions: PostgresExtensions;
  readonly profiles: PostgresProfileBackend;
  readonly http: ClusterHttpParts;
  #server: ServerSide | undefined;

  private constructor(
    node: ClusterNode,
    config: ServerConfig,
    log: Logger,
    http: { view: ClusterView; keys: ProjectKeys },
  ) {
    this.#node = node;
    this.#config = config;
    this.#log = log;
    this.extensions = new PostgresExtensions(node.db);
    this.profiles = new PostgresProfileBackend(node.db, { node: node.name, run: node.run });
    this.http = {
      node,
      ...http,
      // starts refused here, counted for the autoscaler (refusals.ts)
      refusals: new StartRefusals(node.db, node.name),
      clusterMax: config.cluster!.maxInstances,
      local: () => this.#advert(),
    };
  }

  /** Opens the node (refused without the key every node shares) and what its HTTP side reads. */
  static async open(config: ServerConfig, log: Logger): Promise<ClusterParts> {
    const c = config.cluster!;
    const keys = config.secretKeys;
    if (!keys.secretKeyFile && !keys.env.BURROW_SECRET_KEY && !keys.env.BURROW_SECRET_KEY_FILE) {
      throw new ConfigError(
        'cluster mode needs the auth-state key every node shares: give --secret-key-file (or BURROW_SECRET_KEY_FILE) the same 32-byte key on each node',
      );
    }
    let parts: ClusterParts | undefined;
    const node = await ClusterNode.open({
      databaseUrl: c.databaseUrl,
      nodeName: c.nodeName,
      leaseMs: c.leaseMs,
      log,
      // called by lease renewals, so after `listening`
      onLost: (why) => {
        if (parts) parts.#lost(why);
      },
    });
    try {
      const view = await ClusterView.open(node.db);
      // keys of projects live in the cluster's database; the server's own key stays the admin's
      const projectKeys = await ProjectKeys.open(node.db);
      return (parts = new ClusterParts(node, config, log, { view, keys: projectKeys }));
    } catch (err) {
      await node.close();
      throw err;
    }
  }

  get name(): string {
    return this.#node.name;
  }

  get run(): string {
    return this.#node.run;
  }

  get store(): InstanceStore {
    return this.#node.store;
  }

  get authStates(): Pick<AuthStoreOptions, 'backend' | 'shared' | 'caps'> {
    const caps = { count: Infinity, bytes: this.#config.storeCaps.authStates.totalBytes };
    return { backend: this.#node.authStates, shared: true, caps };
  }

  get drainMs(): number {
    return this.#config.cluster!.drainMs;
  }

  get registry(): { newId: () => string; changed: () => void } {
    return {
      newId: () => this.#node.newId(),
      // the others place starts by this node's free slots and warm pool: published on change
      changed: () => this.#node.advertise(() => this.#advert()),
    };
  }

  admit(): Promise<void> {
    return this.#node.admit();
  }

  async followAuthStates(store: AuthStore): Promise<void> {
    await this.#node.authStates.watch((id) => void store.refresh(id).catch(() => {}));
    // and what they saved or deleted while this node did not listen (the database restarted)
    this.#node.db.onRelisten(() => void store.refreshAll().catch(() => {}));
  }

  async followExtensions(store: ExtensionStore): Promise<void> {
    await this.extensions.watch((id) => void store.evict(id).catch(() => {}));
  }

  /**
   * A node adopts its name's earlier rows only once its join proved the name is its own (a
   * second process given a live node's name must not end that node's instances): not ready
   * until then.
   */
  async open(server: ServerSide): Promise<void> {
    this.#server = server;
    server.health.run = this.run; // `/livez` names this run
    server.health.joining();
  }

  /**
   * Takes this node's slot (the ids it mints) now that others can reach it, adopts its earlier
   * rows, and is ready once it proved it can start a sandbox.
   */
  async listening(url: string): Promise<void> {
    const { registry, health, sandboxHost } = this.#side();
    if (!this.#config.publicUrl) {
      // any node forwards a cdp_url to its owner, but clients should not need to know the nodes
      this.#log.warn(
        { url },
        'cluster mode without --public-url: cdp_url and stream_url carry this node’s own address',
      );
    }
    await this.#node.join({ url: this.#config.cluster!.nodeUrl ?? url, ...this.#advert() });
    await registry.adopt();
    health.joined();
    // no instance reaches the cluster's database and nodes, wherever they are
    sandboxHost.refusedEndpoints = () => this.#node.endpoints();
    void health.selfTest();
  }

  drain(): Promise<void> {
    return this.#node.drain();
  }

  released(): Promise<void> {
    return this.profiles.settled();
  }

  async close(): Promise<void> {
    await this.http.refusals.close();
    await this.#node.close();
  }

  /** What this node can take now: free slots under its cap, and its warm pool. */
  #advert(): Omit<NodeAdvert, 'url'> {
    const { registry } = this.#side();
    const max = this.#config.maxInstances;
    return {
      capacity: max,
      freeSlots: Math.max(0, max - registry.liveCount),
      warm: registry.pooled,
    };
  }

  /** This node lost its place in the cluster, or its lease could not be renewed for a while. */
  #lost(why: string): void {
    if (!/taken by another run/.test(why)) {
      this.#log.warn({ why }, 'the cluster lease ran out without renewal; still trying');
      return;
    }
    this.#log.error(
      { why },
      'this node lost its place in the cluster (declared lost, or its name taken): its instances stop; restart it to rejoin',
    );
    const { registry, health } = this.#side();
    health.lost();
    for (const r of registry.list()) {
      if (r.live) void registry.stop(r.id, 'node_lost').catch(() => {});
    }
  }

  #side(): ServerSide {
    if (!this.#server) throw new Error('the cluster parts are used before the server opened them');
    return this.#server;
  }
}
