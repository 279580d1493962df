/**
 * Node death: when another node of the cluster is gone for good, and what becomes of its
 * instances.
 *
 * A node is declared dead only when two things hold at once:
 *
 * - **its lease ran out**, by the database's clock (nodes.ts): it stopped renewing;
 * - **it does not answer probes**: a few `GET /livez` to the URL it advertised, each with a short
 *   timeout, from a node that is alive.
 *
 * The lease alone is not enough: after a database fail-over or pause every lease looks expired
 * until the nodes renew, though every node ran on; the probes tell those apart from a node that
 * really went away. Probes alone are not enough either: a node another one cannot reach (a
 * partition between two nodes) still renews its lease and keeps its instances.
 *
 * Every node watches every other; exactly one acts. The declaration is one conditional `UPDATE`
 * of the node's row (still this run, lease still expired, not already lost or left): the first
 * transaction to commit it wins, a second one waits on the row lock and then matches nothing. In
 * the same transaction the dead run's live instance rows become `status: "error"` with
 * `end_reason: "node_lost"`, and a NOTIFY on the nodes' channel makes every node route that
 * node's ids as lost (forward.ts answers 410 `instance_node_lost`, except the row itself).
 *
 * A node that comes back under the same name is a new run: its join does not resurrect the lost
 * run's rows (the instance store adopts them as ended, and `error` stays `error`), and a lost run
 * that was only slow finds its renewals refused (nodes.ts) and learns that it was declared lost.
 * A node restarted at once (a pod's container restarted, a `kill -9` and a supervisor) need not
 * wait for its old lease to run out: its join probes the old run's URL, and an answer from itself
 * (`/livez` names the run answering) or none at all declares the old run lost at once, with the
 * same transaction (`declareLost(…, {restarted: true})`). A run that answers as itself (two
 * processes given one name) keeps the name.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { repeat } from '../../internal/repeat.js';
import { RUN_HEADER } from '../instances/health.js';
import { LIVE_STATUSES } from '../instances/state.js';
import type { Database } from './database.js';
import { NODES_CHANNEL } from './nodes.js';

/**
 * The WebSocket close a `cdp_url` or live-view socket forwarded through another node gets when
 * the owner node vanished under it (forward.ts): a code of the private range (4000-4999) and the
 * same reason as the instances' `end_reason`.
 */
export const NODE_LOST_CLOSE = { code: 4001, reason: 'node_lost' } as const;

export interface ProbeOptions {
  /** Probes before a node counts as not answering; default 3. */
  attempts?: number;
  /** Milliseconds each probe may take; default 1000. */
  timeoutMs?: number;
  /** Milliseconds between probes; default 250. */
  gapMs?: number;
}

/**
 * Whether the node at `url` answers its liveness route within `timeoutMs` (any 2xx) as run `run`:
 * an answer naming another run (`x-burrow-run`) is the node restarted at the same URL, and the
 * run asked about is gone. An answer that names no run counts as alive.
 */
export async function probeOnce(url: string, timeoutMs: number, run?: string): Promise<boolean> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/livez`, {
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'manual',
    });
    await res.body?.cancel().catch(() => {});
    const answering = res.headers.get(RUN_HEADER);
    return res.ok && (run === undefined || answering === null || answering === run);
  } catch {
    return false;
  }
}

/** Whether the node at `url` answers one of a few probes (as run `run`, when given). */
export async function nodeAnswers(
  url: string,
  opts: ProbeOptions = {},
  run?: string,
): Promise<boolean> {
  const attempts = opts.attempts ?? 3;
  for (let i = 0; i < attempts; i++) {
    if (i > 0) await sleep(opts.gapMs ?? 250);
    if (await probeOnce(url, opts.timeoutMs ?? 1000, run)) return true;
  }
  return false;
}

/**
 * Declare run `run` of node `name` dead, if its lease is still expired and nobody did it first:
 * the ids of its instances that ended `node_lost`, or undefined when this call did not act.
 * `restarted`: the node itself, started again under its name, found that run gone (its URL
 * answers as the new run, or not at all) before the lease ran out (nodes.ts, `join`).
 */
export async function declareLost(
  db: Database,
  name: string,
  run: string,
  { restarted = false }: { restarted?: boolean } = {},
): Promise<string[] | undefined> {
  return db.transaction(async (q) => {
    const won = await q(
      `UPDATE nodes SET state = 'lost'
       WHERE name = $1 AND run = $2 AND state IN ('up', 'draining')
         AND (lease_until < now() OR $3)
       RETURNING name`,
      [name, run, restarted],
    );
    if (won.rowCount === 0) return undefined;
    const lost = await q<{ id: string }>(
      `UPDATE instances SET
         row = row || jsonb_build_object('status', 'error', 'end_reason', 'node_lost'),
         ended_reason = coalesce(ended_reason, 'node_lost'),
         updated_at = now()
       WHERE node = $1 AND run = $2 AND row->>'status' = ANY($3::text[])
       RETURNING id`,
      [name, run, [...LIVE_STATUSES]],
    );
    await q('SELECT pg_notify($1, $2)', [NODES_CHANNEL, name]);
    return lost.rows.map((r) => r.id);
  });
}

export interface DeathWatchOptions extends ProbeOptions {
  /** This node's name: never a candidate. */
  self: string;
  /** The cluster's lease; the watch looks every third of it. */
  leaseMs: number;
  /** Whether the node at `url` answers as run `run` (default `nodeAnswers`). */
  answers?: (url: string, run: string) => Promise<boolean>;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  /**
   * Called after every look (whatever it found): the node reads the nodes' table again, so its
   * routes follow a death even when a NOTIFY was missed (a listening connection the database
   * dropped).
   */
  afterLook?: () => Promise<void>;
}

/** Looks for dead nodes while this node runs (`ClusterNode.join` starts it). */
export class DeathWatch {
  readonly #db: Database;
  readonly #opts: DeathWatchOptions;
  readonly #stop = new AbortController();
  #checking: Promise<void> = Promise.resolve();

  constructor(db: Database, opts: DeathWatchOptions) {
    this.#db = db;
    this.#opts = opts;
  }

  /** Look every third of the lease (at least every 250 ms) until `stop`. */
  start(): void {
    const every = Math.max(250, Math.floor(this.#opts.leaseMs / 3));
    void repeat(() => this.check().catch(() => {}), every, this.#stop.signal);
  }

  /**
   * One look: every other node whose lease ran out and that is not lost or gone is probed; the
   * ones that do not answer are declared lost. A database that does not answer skips the look.
   */
  check(): Promise<void> {
    const next = this.#checking.then(async () => {
      const due = await this.#db.query<{ name: string; run: string; url: string }>(
        `SELECT name, run, url FROM nodes
         WHERE name <> $1 AND state IN ('up', 'draining') AND lease_until < now()`,
        [this.#opts.self],
      );
      const answers =
        this.#opts.answers ?? ((url: string, run: string) => nodeAnswers(url, this.#opts, run));
      await Promise.all(
        due.rows.map(async (n) => {
          if (await answers(n.url, n.run)) return; // late renewals (a database that came back): alive
          if (this.#stop.signal.aborted) return;
          const ids = await declareLost(this.#db, n.name, n.run);
          if (ids) {
            this.#opts.log.warn(
              { node: n.name, instances: ids.length },
              `node ${n.name} declared lost: its lease ran out and it did not answer probes; its instances ended node_lost`,
            );
          }
        }),
      );
      await this.#opts.afterLook?.();
    });
    this.#checking = next.catch(() => {});
    return next;
  }

  stop(): Promise<void> {
    this.#stop.abort();
    return this.#checking;
  }
}
