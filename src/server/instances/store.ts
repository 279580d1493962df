/**
 * Where the registry keeps the rows of its instances: what a listing shows of each (id, type,
 * launch time, resolution, status, end reason, limits) and what a later server run must still
 * answer for. The live side of an instance (its runtime, timers, promises, token, directory)
 * never leaves the registry's memory; a store holds plain rows only.
 *
 * The interface is what a table shared by several machines would need, so every method is
 * async. `MemoryInstanceStore` is the one-machine default: the rows in a Map, and optionally an
 * append-only journal file (one JSON line per start, end and deletion) that the next server run
 * reads after this process was killed (`earlier`).
 *
 * Status changes are not made here: the registry moves a record with `transition` (state.ts)
 * and then writes the row it has become.
 */
import { appendFileSync } from 'node:fs';
import type {
  EndReason,
  InstanceLimits,
  InstanceStatus,
  InstanceType,
  Resolution,
} from '../../api/index.js';

/** One instance as stored: what `GET /v1/instances/{id}` answers of it. */
export interface InstanceRow {
  id: string;
  instance_type: InstanceType;
  /** ISO 8601: when it was started, or for a pooled instance, claimed. */
  launch_time: string;
  resolution: Resolution;
  status: InstanceStatus;
  /** Set once it is terminated or in error. */
  end_reason?: EndReason;
  /** Its sandbox's limits, once started. */
  limits?: InstanceLimits;
  /** The upstream proxy's address it was started with; never its credentials. */
  proxy?: { server: string };
  /** What happened to it that no call answered for (`InstanceServices.event`; listing.ts). */
  events?: { at: string; type: string; message: string }[];
}

export interface InstanceStore {
  /**
   * Insert row `row.id`, or replace it whole. A row keeps the place in `list()` of its first
   * put. Rejects when the row could not be stored; the store is then as before the call.
   */
  put(row: InstanceRow): Promise<void>;
  /**
   * A copy of row `id`, or undefined when there is none. Rejects (a 503 to retry) when the store
   * cannot be read: undefined means the store knows there is none.
   */
  get(id: string): Promise<InstanceRow | undefined>;
  /** Copies of every row, oldest first put first; rejects as `get` does. */
  list(): Promise<InstanceRow[]>;
  /**
   * Remove row `id` (an instance nobody was given): it leaves `list()`, and no later run adopts
   * it. False, changing nothing, when there is no such row.
   */
  delete(id: string): Promise<boolean>;
  /**
   * The instance ended for `reason` (its processes are going): a later run that adopts the row
   * shows it terminated with this reason. The first reason recorded stands. False when there is
   * no such row.
   */
  ended(id: string, reason: EndReason): Promise<boolean>;
  /**
   * The rows of earlier server runs that ended without closing this store (they were killed),
   * each `terminated`, with its recorded end reason or else `server_restart`; deleted rows are
   * left out. They become rows of this store too (`get`, `list`), not counted as started by it.
   * Rows this store already holds are not returned. Call once, at start.
   */
  adopt(): Promise<InstanceRow[]>;
}

/** One line of the journal file. */
export type JournalEntry =
  | { id: string; type: InstanceType; launch_time: string; resolution: Resolution }
  | { id: string; ended: EndReason }
  | { id: string; deleted: true };

export interface MemoryInstanceStoreOptions {
  /** A file this store appends each row's start, end and deletion to; default none. */
  journal?: string;
  /** The journals' text of earlier runs, for `adopt()`; lines cut by a kill are skipped. */
  earlier?: readonly string[];
}

const copy = (row: InstanceRow): InstanceRow => structuredClone(row);

/**
 * The rows in memory, and a journal file so that the next run can answer for them. Journal
 * lines are appended whole (one `write` each); a line cut by a failed append is ended so that it
 * cannot swallow the next one, and is skipped when read.
 */
export class MemoryInstanceStore implements InstanceStore {
  readonly #rows = new Map<string, InstanceRow>();
  readonly #ended = new Set<string>();
  readonly #journal: string | undefined;
  readonly #earlier: readonly string[];

  constructor(options: MemoryInstanceStoreOptions = {}) {
    this.#journal = options.journal;
    this.#earlier = options.earlier ?? [];
  }

  async put(row: InstanceRow): Promise<void> {
    const before = this.#rows.get(row.id);
    if (!before || before.launch_time !== row.launch_time) {
      this.#append({
        id: row.id,
        type: row.instance_type,
        launch_time: row.launch_time,
        resolution: [row.resolution[0], row.resolution[1]],
      });
    }
    this.#rows.set(row.id, copy(row));
  }

  async get(id: string): Promise<InstanceRow | undefined> {
    const row = this.#rows.get(id);
    return row && copy(row);
  }

  async list(): Promise<InstanceRow[]> {
    return [...this.#rows.values()].map(copy);
  }

  async delete(id: string): Promise<boolean> {
    if (!this.#rows.has(id)) return false;
    this.#append({ id, deleted: true });
    this.#rows.delete(id);
    this.#ended.delete(id);
    return true;
  }

  async ended(id: string, reason: EndReason): Promise<boolean> {
    if (!this.#rows.has(id)) return false;
    if (this.#ended.has(id)) return true;
    this.#append({ id, ended: reason });
    this.#ended.add(id);
    return true;
  }

  async adopt(): Promise<InstanceRow[]> {
    const entries = this.#earlier.flatMap(parseJournal);
    const ended = new Map<string, EndReason>();
    const deleted = new Set<string>();
    for (const e of entries) {
      if ('ended' in e && !ended.has(e.id)) ended.set(e.id, e.ended);
      if ('deleted' in e) deleted.add(e.id);
    }
    const adopted: InstanceRow[] = [];
    for (const e of entries) {
      if (!('type' in e) || deleted.has(e.id) || this.#rows.has(e.id)) continue;
      const row: InstanceRow = {
        id: e.id,
        launch_time: e.launch_time,
        instance_type: e.type,
        status: 'terminated',
        resolution: [e.resolution[0], e.resolution[1]],
        end_reason: ended.get(e.id) ?? 'server_restart',
      };
      this.#rows.set(e.id, row);
      this.#ended.add(e.id);
      adopted.push(copy(row));
    }
    return adopted;
  }

  /** Append one line, or throw having changed nothing a reader would take for a line. */
  #append(entry: JournalEntry): void {
    if (!this.#journal) return;
    try {
      appendFileSync(this.#journal, `${JSON.stringify(entry)}\n`, { mode: 0o600 });
    } catch (err) {
      // a short write (disk full) must not run into the next line
      try {
        appendFileSync(this.#journal, '\n', { mode: 0o600 });
      } catch {
        /* nothing was written, or nothing more can be */
      }
      throw err;
    }
  }
}

/** The entries of a journal's text; lines cut by a kill, or not entries at all, are skipped. */
export function parseJournal(text: string): JournalEntry[] {
  const entries: JournalEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    let e: unknown;
    try {
      e = JSON.parse(line);
    } catch {
      continue; // a line cut by the kill
    }
    if (typeof e !== 'object' || e === null || typeof (e as { id?: unknown }).id !== 'string') {
      continue;
    }
    const o = e as Record<string, unknown>;
    if (typeof o.ended === 'string' || o.deleted === true) entries.push(o as JournalEntry);
    else if (
      typeof o.type === 'string' &&
      typeof o.launch_time === 'string' &&
      Array.isArray(o.resolution) &&
      o.resolution.length === 2
    ) {
      entries.push(o as JournalEntry);
    }
  }
  return entries;
}
