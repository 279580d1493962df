/**
 * This server as a node of a cluster: what the composition root (../index.ts) makes of
 * `--cluster`. Opening it connects to the database (migrating it), reads the cluster's id secret
 * and gives the stores the registry and the auth-state store use; `join` takes a slot and a
 * lease once the node listens; `route` says which node owns an instance id, from the id alone
 * (ids.ts) and the nodes' URLs (kept current by NOTIFY).
 */
import { randomBytes } from 'node:crypto';
import { withDeadline } from '../../internal/deadline.js';
import { serverError } from '../errors.js';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { PostgresAuthStateBackend } from './auth-state-backend.js';
import { DeathWatch, declareLost, nodeAnswers } from './death.js';
import { Database, unavailable } from './database.js';
import { IdSigner } from './ids.js';
import { ClientSigner } from './forwarded-client.js';
import { PostgresInstanceStore } from './instance-store.js';
import { listNodes, NodeLease, NODES_CHANNEL, type NodeAdvert } from './nodes.js';

export interface ClusterNodeOptions {
  databaseUrl: string;
  nodeName: string;
  leaseMs: number;
  /** The schema of the cluster's tables; default `burrow`. */
  schema?: string;
  /** The lease was lost (another run took the name, or renewals failed past the lease). */
  onLost?: (why: string) => void;
  /** Where the death watch (death.ts) says which nodes it declared lost. */
  log?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

/** Host and port of a URL (`postgres://…`, `http://…`); undefined for a Unix socket. */
function endpointOf(url: string, defaultPort: number): { host: string; port: number } | undefined {
  try {
    const u = new URL(url);
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    if (!host) return undefined;
    const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : defaultPort;
    return { host, port };
  } catch {
    return undefined;
  }
}

/** How long a changed advert waits for more changes before it is published. */
const ADVERTISE_DELAY_MS = 50;

/**
 * Where a request for an instance goes. `ended`: its node is not there any more, `lost`
 * (declared dead: death.ts; the instance's row says `node_lost`) or `left` (it closed, and
 * stopped its instances first); the row is all that is left of the instance.
 */
export type Route = 'local' | 'unknown' | { node: string; url: string; ended?: 'lost' | 'left' };

export class ClusterNode {
  readonly db: Database;
  readonly name: string;
  readonly run = randomBytes(6).toString('hex');
  readonly store: PostgresInstanceStore;
  readonly authStates: PostgresAuthStateBackend;
  /** Signs and checks the client address of forwarded requests (forwarded-client.ts). */
  readonly clientSigner: ClientSigner;
  readonly #signer: IdSigner;
  readonly #opts: ClusterNodeOptions;
  #lease: NodeLease | undefined;
  /** slot → the node's name and URL, as last read. */
  #nodes = new Map<number, { name: string; url: string; state: string }>();
  #death: DeathWatch | undefined;
  #closed: Promise<void> | undefined;
  /** The advert's publication, while one is waiting (`advertise`). */
  #publish: NodeJS.Timeout | undefined;
  /** The database's and every node's addresses, for the egress to refuse (`endpoints`). */
  #endpoints: { address: string; port?: number }[] = [];

  private constructor(db: Database, secret: Buffer, opts: ClusterNodeOptions) {
    this.db = db;
    this.name = opts.nodeName;
    this.#opts = opts;
    this.#signer = new IdSigner(secret);
    this.clientSigner = new ClientSigner(secret, () => this.#lease?.dbNow() ?? Date.now());
    this.store = new PostgresInstanceStore(db, { node: opts.nodeName, run: this.run });
    this.authStates = new PostgresAuthStateBackend(db);
  }

  static async open(opts: ClusterNodeOptions): Promise<ClusterNode> {
    const db = await Database.open({
      url: opts.databaseUrl,
      ...(opts.schema && { schema: opts.schema }),
    });
    try {
      await db.query(
        'INSERT INTO cluster_secret (one, secret) VALUES (1, $1) ON CONFLICT DO NOTHING',
        [randomBytes(32)],
      );
      const r = await db.query<{ secret: Buffer }>('SELECT secret FROM cluster_secret');
      const node = new ClusterNode(db, r.rows[0]!.secret, opts);
      await db.listen(NODES_CHANNEL, () => void node.#readNodes().catch(() => {}));
      // what changed while nobody listened was not heard of
      db.onRelisten(() => void node.#readNodes().catch(() => {}));
      await node.#resolveEndpoints();
      return node;
    } catch (err) {
      await db.close();
      throw err;
    }
  }

  /** Take this node's slot and lease, advertising `advert`. */
  async join(advert: NodeAdvert): Promise<void> {
    this.#lease = await NodeLease.join(this.db, {
      ...advert,
      name: this.name,
      run: this.run,
      leaseMs: this.#opts.leaseMs,
      ...(this.#opts.onLost && { onLost: this.#opts.onLost }),
      // this name's previous run, if its URL answers as another run (this one, restarted at the
      // same URL) or not at all, is gone: its instances end node_lost now, not a lease later
      takeOver: async (holder) => {
        if (await nodeAnswers(holder.url, {}, holder.run)) return false;
        const ids = await declareLost(this.db, this.name, holder.run, { restarted: true });
        this.#opts.log?.warn(
          { node: this.name, run: holder.run, instances: ids?.length ?? 0 },
          `this node's previous run (${holder.run}) is gone: declared lost, its instances ended node_lost`,
        );
        return ids !== undefined;
      },
    });
    await this.#readNodes();
    this.#death = new DeathWatch(this.db, {
      self: this.name,
      leaseMs: this.#opts.leaseMs,
      log: this.#opts.log ?? { warn: () => {}, info: () => {} },
      afterLook: () => this.#readNodes(),
    });
    this.#death.start();
  }

  /** Mark this node draining in the cluster (placement leaves it out). */
  async drain(): Promise<void> {
    await this.#lease?.drain();
  }

  get slot(): number | undefined {
    return this.#lease?.slot;
  }

  /**
   * Whether this node may start an instance now: the database must answer within `timeoutMs`
   * (its row and its id's owner are written there). Rejects with the 503 for the client.
   */
  async admit(timeoutMs = 2000): Promise<void> {
    try {
      await withDeadline(
        this.db.query('SELECT 1'),
        timeoutMs,
        () => new Error(`no answer within ${timeoutMs} ms`),
      );
    } catch (err) {
      throw serverError('cluster_database_unavailable', { reason: (err as Error).message });
    }
  }

  /** A new instance id owned by this node (after `join`). */
  newId(): string {
    if (!this.#lease) throw new Error('the node has not joined its cluster yet');
    return this.#signer.mint(this.#lease.slot);
  }

  /**
   * What this node advertises (free slots, warm-pool counts), read from `current` when it is
   * published: within `ADVERTISE_DELAY_MS` of the first change, so changes meanwhile go in the
   * same write, and again by every renewal after.
   */
  advertise(current: () => Parameters<NodeLease['advertise']>[0]): void {
    const lease = this.#lease;
    if (!lease) return;
    this.#publish ??= setTimeout(() => {
      this.#publish = undefined;
      lease.advertise(current());
      lease.renew().catch(() => {}); // the database down: the renewal timer tries again
    }, ADVERTISE_DELAY_MS);
    this.#publish.unref();
  }

  /**
   * Which node answers for `id`: this one (`local`: its own slot, or a single-node id), another
   * (its URL), or none (`unknown`: a forged or foreign id, or a slot no node has had).
   */
  async route(id: string): Promise<Route> {
    const owner = this.#signer.owner(id);
    if (owner === undefined) return 'unknown';
    if (owner === 'local' || owner.slot === this.#lease?.slot) return 'local';
    let node = this.#nodes.get(owner.slot);
    if (!node) {
      await this.#readNodes();
      node = this.#nodes.get(owner.slot);
    }
    if (!node) return 'unknown';
    const { name, url, state } = node;
    return state === 'lost' || state === 'left'
      ? { node: name, url, ended: state }
      : { node: name, url };
  }

  /** Read the nodes' table again now (their URLs and states). */
  refresh(): Promise<void> {
    return this.#readNodes();
  }

  async #readNodes(): Promise<void> {
    const next = new Map<number, { name: string; url: string; state: string }>();
    // the database away: a 503 to retry, never an id taken for unknown (a 404) nor a 500
    const nodes = await listNodes(this.db).catch((err: unknown) => {
      throw unavailable(err);
    });
    for (const n of nodes) {
      next.set(n.slot, { name: n.name, url: n.url, state: n.state });
    }
    this.#nodes = next;
    await this.#resolveEndpoints();
  }

  /**
   * What no instance may reach: the database and every node of the cluster. An address of the
   * machine's loopback is refused on that port (the rest of loopback follows the operator's
   * host-port rules); any other address on every port (a node's or the database's machine may
   * serve more than burrow), and on its port as an address of this host (policy.ts compares that
   * port on every spelling of this host: `0.0.0.0`, `::`, the host's interfaces).
   */
  endpoints(): readonly { address: string; port?: number }[] {
    return this.#endpoints;
  }

  async #resolveEndpoints(): Promise<void> {
    const targets: { host: string; port: number }[] = [];
    const db = endpointOf(this.#opts.databaseUrl, 5432);
    if (db) targets.push(db);
    for (const n of this.#nodes.values()) {
      const node = endpointOf(n.url, 80);
      if (node) targets.push(node);
    }
    const out: { address: string; port?: number }[] = [];
    for (const t of targets) {
      let addresses: string[];
      try {
        addresses = isIP(t.host)
          ? [t.host]
          : (await lookup(t.host, { all: true })).map((a) => a.address);
      } catch {
        continue; // a name that does not resolve here is not reachable from here either
      }
      for (const address of addresses) {
        const plain = address.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1');
        const loopback = plain === '::1' || /^127\./.test(plain);
        // with its port too: that port of every address of this host is the same endpoint
        out.push({ address: plain, port: t.port }, ...(loopback ? [] : [{ address: plain }]));
      }
    }
    this.#endpoints = out;
  }

  /** Leave the cluster and close the database. Idempotent. */
  close(): Promise<void> {
    return (this.#closed ??= (async () => {
      clearTimeout(this.#publish);
      await this.#death?.stop();
      await this.#lease?.leave();
      await this.db.close();
    })());
  }
}
