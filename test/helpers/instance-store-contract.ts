/**
 * The contract every `InstanceStore` (src/server/instances/store.ts) must keep, as a suite to run
 * against each implementation: `describeInstanceStore(name, make)`. `make` gives a fresh store
 * and, where the implementation has them, ways to reopen its storage as the next server run and
 * to make its writes fail for a real reason.
 */
import { describe, expect, it } from 'vitest';
import type { InstanceRow, InstanceStore } from '../../src/server/instances/store.js';

export interface InstanceStoreHarness {
  store: InstanceStore;
  /** A store on the same storage, as the next server run opens it (this one was killed). */
  reopen?: () => Promise<InstanceStore>;
  /** Make the store's writes fail for a real reason until the returned undo is called. */
  breakWrites?: () => Promise<() => Promise<void>>;
  /** Check that the storage holds nothing half-written (e.g. every journal line parses). */
  whole?: () => Promise<void>;
}

let n = 0;
export function row(over: Partial<InstanceRow> = {}): InstanceRow {
  n++;
  return {
    id: `inst_${n.toString(16).padStart(16, '0')}`,
    instance_type: 'browser',
    launch_time: new Date(Date.UTC(2025, 0, 1, 0, 0, n)).toISOString(),
    resolution: [1024, 768],
    status: 'deploying',
    ...over,
  };
}

/**
 * What an implementation keeps beyond one process: a store with no storage of its own (memory
 * only) has no next run to reopen and no write that can fail, and those parts of the contract
 * are not defined for it, rather than defined and skipped.
 */
export interface StoreStorage {
  persistent: boolean;
}

export function describeInstanceStore(
  name: string,
  make: () => Promise<InstanceStoreHarness>,
  storage: StoreStorage = { persistent: true },
): void {
  describe(`InstanceStore contract: ${name}`, () => {
    it('lists rows in the order of their first put; an overwrite keeps the place', async () => {
      const { store } = await make();
      const [a, b, c] = [row(), row({ instance_type: 'ubuntu' }), row()];
      for (const r of [a, b, c]) await store.put(r);
      await store.put({ ...a, status: 'running' });
      const ids = (await store.list()).map((r) => r.id);
      expect(ids).toEqual([a.id, b.id, c.id]);
    });

    it('answers undefined, false or nothing for ids it does not hold', async () => {
      const { store } = await make();
      await store.put(row());
      expect(await store.get('inst_ffffffffffffffff')).toBeUndefined();
      expect(await store.delete('inst_ffffffffffffffff')).toBe(false);
      expect(await store.ended('inst_ffffffffffffffff', 'stopped')).toBe(false);
      expect(await store.list()).toHaveLength(1);
    });

    it('replaces a row whole on put, and hands out copies', async () => {
      const { store } = await make();
      const a = row();
      await store.put(a);
      const limits = { memory_bytes: 1, pids: 2, cpus: null, disk_bytes: null };
      const later: InstanceRow = { ...a, status: 'error', end_reason: 'crashed', limits };
      await store.put(later);
      expect(await store.get(a.id)).toEqual(later);
      const got = await store.get(a.id);
      got!.status = 'running';
      got!.resolution[0] = 1;
      expect(await store.get(a.id)).toEqual(later);
      a.status = 'paused'; // what was put is not kept by reference
      expect((await store.list())[0]).toEqual(later);
    });

    it('deletes a row: gone from get and list, and a second delete is false', async () => {
      const { store } = await make();
      const [a, b] = [row(), row()];
      await store.put(a);
      await store.put(b);
      expect(await store.delete(a.id)).toBe(true);
      expect(await store.get(a.id)).toBeUndefined();
      expect((await store.list()).map((r) => r.id)).toEqual([b.id]);
      expect(await store.delete(a.id)).toBe(false);
      expect(await store.ended(a.id, 'stopped')).toBe(false);
    });

    it('takes two writers at once: every row of each is kept, each row whole', async () => {
      const { store } = await make();
      const mine = Array.from({ length: 20 }, () => row());
      const theirs = Array.from({ length: 20 }, () => row({ instance_type: 'ubuntu' }));
      const shared = row();
      await Promise.all([
        ...mine.map((r) => store.put(r)),
        ...theirs.map((r) => store.put(r)),
        store.put({ ...shared, status: 'running' }),
        store.put({ ...shared, status: 'paused' }),
      ]);
      const listed = await store.list();
      expect(listed).toHaveLength(41);
      for (const r of [...mine, ...theirs]) expect(await store.get(r.id)).toEqual(r);
      expect(['running', 'paused']).toContain((await store.get(shared.id))?.status);
      await Promise.all([...mine.map((r) => store.ended(r.id, 'stopped'))]);
    });

    it('adopts nothing from an empty past, and nothing twice', async () => {
      const { store } = await make();
      await store.put(row());
      expect(await store.adopt()).toEqual([]);
      expect(await store.list()).toHaveLength(1);
    });

    const persistent = storage.persistent ? it : () => undefined;
    persistent(
      'leaves the next run every row it put, ended with its reason, deleted ones gone',
      async () => {
        const h = await make();
        if (!h.reopen) throw new Error(`${name} is persistent but its harness cannot reopen it`);
        const { store } = h;
        const [running, stopped, crashed, deleted] = [row(), row(), row(), row()];
        for (const r of [running, stopped, crashed, deleted]) await store.put(r);
        await store.put({ ...running, status: 'running' });
        await store.put({ ...stopped, status: 'terminated', end_reason: 'stopped' });
        expect(await store.ended(stopped.id, 'stopped')).toBe(true);
        expect(await store.ended(crashed.id, 'crashed')).toBe(true);
        expect(await store.ended(crashed.id, 'expired')).toBe(true); // the first reason stands
        expect(await store.delete(deleted.id)).toBe(true);

        const next = await h.reopen();
        const adopted = await next.adopt();
        const view = (r: InstanceRow) => [r.id, r.instance_type, r.status, r.end_reason];
        expect(adopted.map(view)).toEqual([
          [running.id, running.instance_type, 'terminated', 'server_restart'],
          [stopped.id, stopped.instance_type, 'terminated', 'stopped'],
          [crashed.id, crashed.instance_type, 'terminated', 'crashed'],
        ]);
        expect(adopted[0]).toMatchObject({
          launch_time: running.launch_time,
          resolution: running.resolution,
        });
        expect(await next.list()).toEqual(adopted);
        expect(await next.get(crashed.id)).toEqual(adopted[2]);
        expect(await next.adopt()).toEqual([]); // once
      },
    );

    persistent('changes nothing when a write fails, and leaves nothing half-written', async () => {
      const h = await make();
      if (!h.breakWrites)
        throw new Error(`${name} is persistent but its harness cannot break writes`);
      const { store } = h;
      const a = row();
      await store.put(a);
      const undo = await h.breakWrites();
      const b = row();
      await expect(store.put(b)).rejects.toThrow();
      await expect(store.delete(a.id)).rejects.toThrow();
      await expect(store.ended(a.id, 'stopped')).rejects.toThrow();
      expect(await store.get(b.id)).toBeUndefined();
      expect(await store.get(a.id)).toEqual(a);
      expect((await store.list()).map((r) => r.id)).toEqual([a.id]);
      await undo();
      await h.whole?.();
      // the store goes on once the fault is gone, a failed `ended` included
      await store.put(b);
      expect(await store.ended(a.id, 'expired')).toBe(true);
      await h.whole?.();
      if (h.reopen) {
        const adopted = await (await h.reopen()).adopt();
        expect(adopted.map((r) => [r.id, r.end_reason])).toEqual([
          [a.id, 'expired'],
          [b.id, 'server_restart'],
        ]);
      }
    });
  });
}
