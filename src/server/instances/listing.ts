/**
 * The listed instances and their rows in the instance store (store.ts). Every status change
 * goes through `move`, which makes it by `transition` (state.ts holds the table of the life
 * cycle) and writes the row it leaves; the listing and `GET /v1/instance/{id}` read the store back
 * (`rows`, `row`), so another store (a shared table) answers them without the registry changing.
 * The writes go one after another, so that a row's last write is its last state. Terminated
 * instances stay listed; a pooled instance is not listed until claimed.
 */
import type { EndReason, Instance, InstanceStatus } from '../../api/index.js';
import { RetryBackoff } from '../../internal/backoff.js';
import { raceDeadline } from '../../internal/deadline.js';
import type { Logger } from '../../internal/log.js';
import { serverError } from '../errors.js';
import { InstanceRecord, withTimeLeft } from './record.js';
import { transition } from './state.js';
import { MemoryInstanceStore, type InstanceRow, type InstanceStore } from './store.js';

/** How long `flushed()` waits at most for a store that does not answer. */
const FLUSH_WAIT_MS = 2_000;

export interface ListingOptions {
  log: Logger;
  /** Default: a `MemoryInstanceStore` without a journal. */
  store?: InstanceStore | undefined;
  /** An instance moved (the registry's `changed`). */
  changed?: (() => void) | undefined;
}

export class Listing {
  readonly #instances = new Map<string, InstanceRecord>();
  readonly #opts: ListingOptions;
  readonly #store: InstanceStore;
  #writes: Promise<void> = Promise.resolve();
  /** The wait before a refused write is tried again. */
  readonly #retry = new RetryBackoff(1_000, 30_000);
  #closing = false;

  constructor(opts: ListingOptions) {
    this.#opts = opts;
    this.#store = opts.store ?? new MemoryInstanceStore();
  }

  /** The listed record `id`, or 404. */
  get(id: string): InstanceRecord {
    const rec = this.#instances.get(id);
    if (!rec) throw serverError('instance_not_found', { id });
    return rec;
  }

  /** The listed record `id`, if any. */
  find(id: string): InstanceRecord | undefined {
    return this.#instances.get(id);
  }

  /** Whether `rec` itself is listed (a pooled one is not until claimed). */
  has(rec: InstanceRecord): boolean {
    return this.#instances.get(rec.id) === rec;
  }

  records(): InstanceRecord[] {
    return [...this.#instances.values()];
  }

  /** Instances counted against the cap: every live one a caller started (not the pool). */
  liveCount(): number {
    let n = 0;
    for (const r of this.#instances.values()) if (r.live) n++;
    return n;
  }

  /** List `rec` and write its row. */
  add(rec: InstanceRecord): void {
    this.#instances.set(rec.id, rec);
    this.save(rec);
  }

  /** Take `rec`, which nobody was given, out of the listing and the store. */
  remove(rec: InstanceRecord): void {
    this.#instances.delete(rec.id);
    this.#write(() => this.#store.delete(rec.id));
  }

  /** `transition`, and the row it leaves written to the store when `rec` is listed. */
  move(rec: InstanceRecord, to: InstanceStatus, reason?: EndReason): boolean {
    if (!transition(rec, to, reason)) return false;
    if (this.has(rec)) this.save(rec);
    this.#opts.changed?.();
    return true;
  }

  /** Keep an event of `rec` and write its row. */
  event(rec: InstanceRecord, type: string, message: string): void {
    rec.note(type, message);
    if (this.has(rec)) this.save(rec);
  }

  /** Write the row of the listed `rec` as it is now (after the writes queued before). */
  save(rec: InstanceRecord): void {
    const row = rec.row();
    this.#write(() => this.#store.put(row));
  }

  /** The store told that the listed `rec` ended, with `reason`. */
  ended(rec: InstanceRecord, reason: EndReason): void {
    this.#write(() => this.#store.ended(rec.id, reason));
  }

  /**
   * The listing as the store has it (`GET /v1/instances`): every row, after the writes queued
   * before this call (or `FLUSH_WAIT_MS` of waiting for them), so a client reads what it was just
   * told. A store that cannot be read rejects (a 503 to retry).
   */
  async rows(): Promise<Instance[]> {
    await this.flushed();
    return (await this.#store.list()).map((row) => withTimeLeft({ ...row }));
  }

  /**
   * Row `id` as the store has it (`GET /v1/instance/{id}`), after the writes queued before this
   * call as `rows` waits for them; or 404 when there is none. An instance listed here (this
   * server's own) is answered from its record when the store cannot be read, or does not have
   * its row yet (a write waiting for the store): what exists is never a 404, and a node answers
   * for its own instances while its cluster's database is away. Another's rejects then (a 503).
   */
  async row(id: string): Promise<Instance> {
    await this.flushed();
    const own = this.#instances.get(id);
    let row: InstanceRow | undefined;
    try {
      row = await this.#store.get(id);
    } catch (err) {
      if (!own) throw err;
    }
    row ??= own?.row();
    if (!row) throw serverError('instance_not_found', { id });
    return withTimeLeft({ ...row });
  }

  /**
   * Resolves once the rows queued so far are in the store, or after `FLUSH_WAIT_MS` when the
   * store does not answer (its database away; the write goes on). The API's answer to a start or
   * a stop waits for it, so that a client who then lists through another node of a cluster sees
   * what it was just told.
   */
  async flushed(): Promise<void> {
    await raceDeadline(this.#writes, FLUSH_WAIT_MS);
  }

  /**
   * No more retries: each write still queued is tried once more, and given up (logged) if the
   * store refuses it; resolves once all are done (server shutdown).
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#retry.now();
    await this.#writes;
  }

  /**
   * Instances of earlier server runs that ended without stopping them (it was killed), as the
   * store has them (`InstanceStore.adopt`): listed as terminated, with the reason they ended,
   * `server_restart` unless the store says. Call once, before the first start.
   */
  async adopt(): Promise<void> {
    for (const row of await this.#store.adopt()) {
      if (this.#instances.has(row.id)) continue;
      const rec = new InstanceRecord(
        row.id,
        row.instance_type,
        new Date(row.launch_time),
        [row.resolution[0], row.resolution[1]],
        '',
        '',
        'terminated',
        row.end_reason ?? 'server_restart',
      );
      if (row.limits) rec.limits = row.limits;
      this.#instances.set(row.id, rec);
    }
  }

  #write(op: () => Promise<unknown>): void {
    this.#writes = this.#writes.then(() => this.#land(op));
  }

  /**
   * Runs `op` until the store takes it. A write the store refused (its database away, its disk
   * full) is tried again after 1 s, then after twice as long each time up to 30 s, and the writes
   * queued after it wait for it, so that each row's last write is still its last state and
   * nothing is lost when the store is back. A closing listing gives up at once, and logs it.
   */
  async #land(op: () => Promise<unknown>): Promise<void> {
    const log = this.#opts.log;
    for (let failures = 0; ; failures++) {
      try {
        await op();
        if (failures > 0) {
          this.#retry.succeeded();
          log.info({ failures }, 'the instance store took the writes it had refused');
        }
        return;
      } catch (err) {
        if (this.#closing) return log.warn({ err }, 'could not write the instance store');
        if (failures === 0) {
          log.warn({ err }, 'the instance store refused a write; it is retried until it lands');
        }
        await this.#retry.wait();
      }
    }
  }
}
