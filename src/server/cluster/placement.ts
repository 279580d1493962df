/**
 * Placement: which node of the cluster starts an instance that `POST /v1/start` asked any node
 * for, and when a full cluster is worth asking again.
 *
 * - **Warm first.** A start the warm pool can serve (no extensions, no profile, no identity:
 *   what `Registry.start` claims from its pool) goes to a node that advertises a ready instance
 *   of its type, this node's own pool before another's (no hop).
 * - **Else best of K.** K nodes (default 2) are sampled at random among those with room, and the
 *   one with the lowest load (live / capacity) takes it; ties go to this node. Sampling a few
 *   instead of taking the global minimum keeps nodes that read the same, slightly old view from
 *   all sending their starts to the same node at once.
 * - **Which nodes.** Up (not draining, not left), leased (the lease left when the view was read,
 *   less the time since), and with a free slot. This node's own numbers are read from its
 *   registry, never from the view; the others' come from their adverts, which they publish on
 *   every change (NOTIFY `burrow_nodes`), so a view is as old as the last notification.
 * - **A cluster-wide cap** (`cluster.maxInstances`) counts the live instances of every leased
 *   node: at the cap nobody has room, whatever the nodes advertise.
 *
 * Nothing here forwards: http/start-placement.ts sends the start where this says.
 */
import type { RunnableInstanceType } from '../../api/index.js';
import type { Database } from './database.js';
import { NODES_CHANNEL, type NodeAdvert } from './nodes.js';
import { END_WINDOW_SECONDS, type ClusterLoad } from '../instances/retry-after.js';
import { LIVE_STATUSES } from '../instances/state.js';

// the formula is shared with a single node's own cap (retry-after.ts)
export {
  retryAfterSeconds,
  RETRY_AFTER_MAX_SECONDS,
  RETRY_AFTER_MIN_SECONDS,
  type ClusterLoad,
} from '../instances/retry-after.js';

type InstanceType = RunnableInstanceType;

/** A node as placement sees it. */
export interface NodeLoad {
  name: string;
  url: string;
  capacity: number;
  freeSlots: number;
  warm: NodeAdvert['warm'];
  state: 'up' | 'draining' | 'left';
  /** Whether its lease is running now. */
  leased: boolean;
}

export interface Choice {
  node: NodeLoad;
  /** A warm-pool claim (the node advertised a ready instance of the type). */
  warm: boolean;
}

export interface ChooseOptions {
  type: InstanceType;
  /** Whether the start could be served from a warm pool. */
  warmEligible: boolean;
  /** The name of the node choosing (preferred on ties and for its own warm pool). */
  self: string;
  /** Nodes not to choose (one that answered 429 to this start). */
  exclude?: ReadonlySet<string>;
  /** How many nodes to sample; default 2. */
  k?: number;
  /** The cluster-wide cap of live instances, if any. */
  clusterMax?: number | undefined;
  /** A number in [0, 1); default `Math.random`. */
  random?: () => number;
}

/** Live instances a node runs, from its advert. */
export const liveOf = (n: NodeLoad): number => Math.max(0, n.capacity - n.freeSlots);
const loadOf = (n: NodeLoad): number => (n.capacity > 0 ? liveOf(n) / n.capacity : 1);
const counted = (n: NodeLoad): boolean => n.leased && n.state !== 'left';

/** Live instances of the cluster: every leased node's. */
export function clusterLive(nodes: readonly NodeLoad[]): number {
  return nodes.filter(counted).reduce((sum, n) => sum + liveOf(n), 0);
}

/** The node to start on, or undefined when no node has room (the cluster is full). */
export function choose(nodes: readonly NodeLoad[], o: ChooseOptions): Choice | undefined {
  if (o.clusterMax !== undefined && clusterLive(nodes) >= o.clusterMax) return undefined;
  const open = nodes.filter(
    (n) => n.state === 'up' && n.leased && n.freeSlots > 0 && !o.exclude?.has(n.name),
  );
  if (open.length === 0) return undefined;
  const random = o.random ?? Math.random;
  if (o.warmEligible) {
    const warm = open.filter((n) => (n.warm[o.type] ?? 0) > 0);
    const own = warm.find((n) => n.name === o.self);
    if (own) return { node: own, warm: true };
    if (warm.length > 0) return { node: best(sample(warm, o.k ?? 2, random), o.self), warm: true };
  }
  return { node: best(sample(open, o.k ?? 2, random), o.self), warm: false };
}

/** `k` distinct members of `list` at random (all of them when it has no more). */
function sample<T>(list: readonly T[], k: number, random: () => number): T[] {
  const pool = [...list];
  const out: T[] = [];
  while (out.length < k && pool.length > 0) {
    out.push(pool.splice(Math.floor(random() * pool.length), 1)[0]!);
  }
  return out;
}

/** The least-loaded of `list` (not empty); `self` on a tie, else the first. */
function best(list: readonly NodeLoad[], self: string): NodeLoad {
  let pick = list[0]!;
  for (const n of list.slice(1)) {
    const d = loadOf(n) - loadOf(pick);
    if (d < 0 || (d === 0 && n.name === self)) pick = n;
  }
  return pick;
}

/** The cluster's load for `retryAfterSeconds`, read from the instance rows (database clock). */
export async function readClusterLoad(
  db: Pick<Database, 'query'>,
  needed: number,
): Promise<ClusterLoad> {
  // the live rows of running nodes: a dead node's rows wait for its death to be declared
  const live = await db.query<{ left: number | null }>(
    `SELECT extract(epoch FROM ((i.row->>'expires_at')::timestamptz - now()))::float8 AS left
     FROM instances i JOIN nodes n ON n.name = i.node AND n.run = i.run
     WHERE i.ended_reason IS NULL AND i.row->>'status' = ANY($1::text[])
       AND n.lease_until > now() AND n.state <> 'left'`,
    [[...LIVE_STATUSES]],
  );
  const ended = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM instances
     WHERE ended_reason IS NOT NULL AND updated_at > now() - $1 * interval '1 second'`,
    [END_WINDOW_SECONDS],
  );
  return {
    needed,
    secondsToDeadline: live.rows
      .map((r) => r.left)
      .filter((s): s is number => s !== null)
      .map((s) => Math.max(0, s)),
    recentEnds: ended.rows[0]?.n ?? 0,
    windowSeconds: END_WINDOW_SECONDS,
  };
}

interface LoadRow {
  name: string;
  url: string;
  capacity: number;
  free_slots: number;
  warm: NodeAdvert['warm'];
  state: NodeLoad['state'];
  lease_left_ms: number;
}

/**
 * The other nodes' adverts as this node last read them: read again on every notification on
 * `burrow_nodes` (one read at a time; notifications during a read make one more) and after the
 * listening connection was lost and is back. A lease counts as running while the time it had
 * left at the read (the database's clock) has not passed here since.
 */
export class ClusterView {
  readonly #db: Database;
  #rows: { row: LoadRow; readAt: number }[] = [];
  #reading: Promise<void> | undefined;
  #again = false;
  #stops: (() => void)[] = [];

  private constructor(db: Database) {
    this.#db = db;
  }

  static async open(db: Database): Promise<ClusterView> {
    const view = new ClusterView(db);
    view.#stops.push(await db.listen(NODES_CHANNEL, () => void view.refresh().catch(() => {})));
    view.#stops.push(db.onRelisten(() => void view.refresh().catch(() => {})));
    await view.refresh();
    return view;
  }

  /** Read the nodes now (coalesced with a read under way: resolves after one that began later). */
  refresh(): Promise<void> {
    if (this.#reading) {
      this.#again = true;
      return this.#reading;
    }
    this.#reading = (async () => {
      try {
        do {
          this.#again = false;
          const r = await this.#db.query<LoadRow>(
            `SELECT name, url, capacity, free_slots, warm, state,
               (extract(epoch FROM (lease_until - now())) * 1000)::float8 AS lease_left_ms
             FROM nodes WHERE state <> 'left'`,
          );
          const readAt = performance.now();
          this.#rows = r.rows.map((row) => ({ row, readAt }));
        } while (this.#again);
      } finally {
        this.#reading = undefined;
      }
    })();
    return this.#reading;
  }

  /** Every node not gone, as last read. */
  nodes(): NodeLoad[] {
    const now = performance.now();
    return this.#rows.map(({ row, readAt }) => ({
      name: row.name,
      url: row.url,
      capacity: row.capacity,
      freeSlots: row.free_slots,
      warm: row.warm,
      state: row.state,
      leased: row.lease_left_ms - (now - readAt) > 0,
    }));
  }

  close(): void {
    for (const stop of this.#stops.splice(0)) stop();
  }
}
