/**
 * The nodes of a cluster and their leases. A node joins under a name that stays the same across
 * its restarts (a StatefulSet pod's name, a host name) and gets a slot: a small number, kept for
 * that name, that instance ids carry (ids.ts) so any node knows an instance's owner without a
 * query. While it runs, the node renews a lease and advertises its URL, capacity, free slots
 * and warm-pool counts; every node sees the others' changes through NOTIFY `burrow_nodes`.
 *
 * All times are the database's (`now()`): nodes' clocks never meet. A lease that ran out does
 * not by itself make a node dead (a database fail-over must not look like node death); the
 * death detector also probes the node directly.
 */
import { repeat } from '../../internal/repeat.js';
import { DEFAULT_LEASE_SECONDS, type WarmPoolSizes } from '../config.js';
import type { Database } from './database.js';

/** Slots are 12 bits in an id: 1 … 4095 (0 is never given). */
export const MAX_SLOT = 0xfff;

/** The channel node changes are announced on; the payload is the node's name. */
export const NODES_CHANNEL = 'burrow_nodes';

const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export interface NodeAdvert {
  /** The URL other nodes reach this one at (not the cluster's public URL). */
  url: string;
  /** Live instances this node takes at most. */
  capacity: number;
  /** Of those, how many more it can start now. */
  freeSlots: number;
  /** Warm-pool instances ready per type. */
  warm: WarmPoolSizes;
}

export interface NodeInfo extends NodeAdvert {
  name: string;
  slot: number;
  /** `lost`: declared dead by another node (death.ts); its instances ended `node_lost`. */
  state: 'up' | 'draining' | 'left' | 'lost';
  /** The lease is still running, by the database's clock. */
  leased: boolean;
  leaseUntil: string;
}

export interface JoinOptions extends NodeAdvert {
  name: string;
  /** This process's run id. */
  run: string;
  /** How long a lease lasts without renewal; default 15 s. Renewed every third of it. */
  leaseMs?: number;
  /** The lease was taken by another run of this name, or could not be renewed before it ran out. */
  onLost?: (why: string) => void;
  /**
   * Another run holds this name's lease: whether it is gone and its place was taken over (it is
   * then asked again once). node.ts probes its URL and declares it lost (death.ts).
   */
  takeOver?: (holder: { run: string; url: string }) => Promise<boolean>;
}

/** The name's lease is held by another run, which answered as itself or was not asked. */
class NameHeld extends Error {
  constructor(
    readonly holder: { run: string; url: string },
    name: string,
    until: Date,
  ) {
    super(
      `node name ${name} is held by a running node until ${until.toISOString()}: give this node another name, or wait for that lease to run out`,
    );
  }
}

interface NodeRow {
  name: string;
  slot: number;
  url: string;
  capacity: number;
  free_slots: number;
  warm: NodeAdvert['warm'];
  state: NodeInfo['state'];
  leased: boolean;
  lease_until: Date;
}

const info = (r: NodeRow): NodeInfo => ({
  name: r.name,
  slot: r.slot,
  url: r.url,
  capacity: r.capacity,
  freeSlots: r.free_slots,
  warm: r.warm,
  state: r.state,
  leased: r.leased,
  leaseUntil: r.lease_until.toISOString(),
});

const SELECT = `SELECT name, slot, url, capacity, free_slots, warm, state,
  lease_until > now() AS leased, lease_until FROM nodes`;

/** Every node the cluster has known, by slot. */
export async function listNodes(db: Database): Promise<NodeInfo[]> {
  return (await db.query<NodeRow>(`${SELECT} ORDER BY slot`)).rows.map(info);
}

/** This node's membership: joined, renewing, and left once. */
export class NodeLease {
  readonly name: string;
  readonly slot: number;
  readonly #db: Database;
  readonly #run: string;
  readonly #leaseMs: number;
  readonly #onLost: ((why: string) => void) | undefined;
  #advert: NodeAdvert;
  /** Ends the renewals (`leave`). */
  readonly #renewals = new AbortController();
  #renewing: Promise<void> = Promise.resolve();
  #lastRenewed = Date.now();
  #left: Promise<void> | undefined;
  /**
   * The database's clock less this machine's, as the last renewal saw it (its `now()` against the
   * middle of the round trip): what `dbNow` adds to the local clock.
   */
  #clockOffsetMs = 0;

  private constructor(db: Database, opts: JoinOptions, slot: number) {
    this.#db = db;
    this.name = opts.name;
    this.slot = slot;
    this.#run = opts.run;
    this.#leaseMs = opts.leaseMs ?? DEFAULT_LEASE_SECONDS * 1000;
    this.#onLost = opts.onLost;
    this.#advert = {
      url: opts.url,
      capacity: opts.capacity,
      freeSlots: opts.freeSlots,
      warm: opts.warm,
    };
  }

  /**
   * Join the cluster: take this name's slot (or the lowest free one), refusing while another
   * run of the same name holds a lease, then renew until `leave()`.
   */
  static async join(db: Database, opts: JoinOptions): Promise<NodeLease> {
    try {
      return await NodeLease.#join(db, opts);
    } catch (err) {
      if (!(err instanceof NameHeld) || !(await opts.takeOver?.(err.holder))) throw err;
      return NodeLease.#join(db, opts);
    }
  }

  static async #join(db: Database, opts: JoinOptions): Promise<NodeLease> {
    if (!NODE_NAME.test(opts.name)) {
      throw new Error(
        `a node name is 1-63 letters, digits, '.', '_' or '-' (starting with a letter or digit), not ${JSON.stringify(opts.name)}`,
      );
    }
    const leaseMs = opts.leaseMs ?? DEFAULT_LEASE_SECONDS * 1000;
    const slot = await db.transaction(async (q) => {
      // one joiner at a time: slots are handed out by looking at the others
      await q('LOCK TABLE nodes IN SHARE ROW EXCLUSIVE MODE');
      const mine = await q<{
        slot: number;
        run: string;
        url: string;
        held: boolean;
        until: Date;
      }>(
        `SELECT slot, run, url, lease_until > now() AND state NOT IN ('left', 'lost') AS held,
           lease_until AS until
         FROM nodes WHERE name = $1`,
        [opts.name],
      );
      const before = mine.rows[0];
      if (before?.held && before.run !== opts.run) {
        throw new NameHeld({ run: before.run, url: before.url }, opts.name, before.until);
      }
      let slot = before?.slot;
      if (slot === undefined) {
        const free = await q<{ slot: number }>(
          `SELECT s AS slot FROM generate_series(1, ${MAX_SLOT}) s
           WHERE NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.slot = s) LIMIT 1`,
        );
        slot = free.rows[0]?.slot;
        if (slot === undefined)
          throw new Error(`the cluster has no free node slot (${MAX_SLOT} nodes)`);
      }
      await q(
        `INSERT INTO nodes (name, run, slot, url, capacity, free_slots, warm, state, started_at, lease_until)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'up', now(), now() + $8 * interval '1 millisecond')
         ON CONFLICT (name) DO UPDATE SET run = EXCLUDED.run, url = EXCLUDED.url,
           capacity = EXCLUDED.capacity, free_slots = EXCLUDED.free_slots, warm = EXCLUDED.warm,
           state = 'up', started_at = now(), lease_until = EXCLUDED.lease_until`,
        [
          opts.name,
          opts.run,
          slot,
          opts.url,
          opts.capacity,
          opts.freeSlots,
          JSON.stringify(opts.warm),
          leaseMs,
        ],
      );
      await q('SELECT pg_notify($1, $2)', [NODES_CHANNEL, opts.name]);
      return slot;
    });
    const lease = new NodeLease(db, opts, slot);
    const sentAt = Date.now();
    const clock = await db.query<{ db_now: Date }>('SELECT clock_timestamp() AS db_now');
    lease.#sawClock(sentAt, clock.rows[0]?.db_now);
    void lease.#renewEvery(Math.max(100, Math.floor(lease.#leaseMs / 3)));
    return lease;
  }

  /**
   * The database's time now, in Unix milliseconds, as this node reckons it from its last renewal:
   * for what nodes compare without asking the database (forwarded-client.ts), so that no node's
   * own clock is trusted across nodes.
   */
  dbNow(): number {
    return Date.now() + this.#clockOffsetMs;
  }

  #sawClock(sentAt: number, dbNow: Date | undefined): void {
    if (!dbNow) return;
    const back = Date.now();
    this.#clockOffsetMs = Math.round(dbNow.getTime() - (sentAt + back) / 2);
  }

  /** What this node advertises from the next renewal on. */
  advertise(change: Partial<Omit<NodeAdvert, 'url'>>): void {
    this.#advert = { ...this.#advert, ...change };
  }

  /**
   * Renew now (the timer does it every third of the lease), publishing the advert: the other
   * nodes hear of it (NOTIFY) and read it. Rejects when the lease is gone.
   */
  renew(): Promise<void> {
    const next = this.#renewing.then(async () => {
      const a = this.#advert;
      const sentAt = Date.now();
      const r = await this.#db.query<{ db_now: Date }>(
        `WITH renewed AS (
           UPDATE nodes SET lease_until = now() + $3 * interval '1 millisecond',
             capacity = $4, free_slots = $5, warm = $6
           WHERE name = $1 AND run = $2 AND state NOT IN ('left', 'lost') RETURNING name)
         SELECT pg_notify($7, name), clock_timestamp() AS db_now FROM renewed`,
        [
          this.name,
          this.#run,
          this.#leaseMs,
          a.capacity,
          a.freeSlots,
          JSON.stringify(a.warm),
          NODES_CHANNEL,
        ],
      );
      if (r.rowCount === 0) {
        throw new Error(
          `node ${this.name}'s lease was taken by another run (or the node was declared lost)`,
        );
      }
      this.#sawClock(sentAt, r.rows[0]?.db_now);
      this.#lastRenewed = Date.now();
    });
    this.#renewing = next.catch(() => {});
    return next;
  }

  /** Mark this node draining: it takes no new instances (placement reads it). */
  async drain(): Promise<void> {
    await this.#db.query(`UPDATE nodes SET state = 'draining' WHERE name = $1 AND run = $2`, [
      this.name,
      this.#run,
    ]);
    await this.#db.notify(NODES_CHANNEL, this.name);
  }

  /** Leave the cluster: the lease ends now and the slot stays this name's. Idempotent. */
  leave(): Promise<void> {
    return (this.#left ??= (async () => {
      this.#renewals.abort();
      await this.#renewing;
      await this.#db
        .query(
          `UPDATE nodes SET state = 'left', lease_until = now() WHERE name = $1 AND run = $2`,
          [this.name, this.#run],
        )
        .catch(() => {});
      await this.#db.notify(NODES_CHANNEL, this.name).catch(() => {});
    })());
  }

  /**
   * Renews every `ms` until `leave`, or until the lease is found taken. A renewal that fails
   * while the database does not answer is not a lost lease until the lease ran out.
   */
  #renewEvery(ms: number): Promise<void> {
    return repeat(
      () =>
        this.renew().then(
          () => true,
          (err: Error) => {
            const taken = /taken by another run/.test(err.message);
            if (taken || Date.now() - this.#lastRenewed > this.#leaseMs) {
              this.#onLost?.(err.message);
            }
            return !taken;
          },
        ),
      ms,
      this.#renewals.signal,
    );
  }
}
