/**
 * The contract every `AuthStateBackend` (src/server/auth-states/backend.ts) must keep, as a suite
 * to run against each implementation: `describeAuthStateBackend(name, make)`. `make` gives a
 * fresh backend and, where the implementation has them, a way to open a second one on the same
 * storage and a way to make a write fail for a real reason.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AuthStateBackend } from '../../src/server/auth-states/backend.js';

export interface AuthStateBackendHarness {
  backend: AuthStateBackend;
  /** Another backend on the same storage (the next server run, or a second writer). */
  reopen?: () => Promise<AuthStateBackend>;
  /** Make the next write of `id` fail for a real reason; the returned undo removes the cause. */
  breakWrite?: (id: string) => Promise<() => Promise<void>>;
  /** What the storage holds besides committed records (temp files): empty when nothing is half-written. */
  debris?: () => Promise<string[]>;
}

const newId = () => `auth_${randomBytes(8).toString('hex')}`;
/** A record's text as a store seals it: a few hundred bytes to a few hundred kilobytes. */
const text = (size = 300) => JSON.stringify({ sealed: randomBytes(size).toString('base64') });

export function describeAuthStateBackend(
  name: string,
  make: () => Promise<AuthStateBackendHarness>,
): void {
  describe(`AuthStateBackend contract: ${name}`, () => {
    it('lists ids sorted, whatever the order they were written in', async () => {
      const { backend } = await make();
      expect(await backend.list()).toEqual([]);
      const ids = [newId(), newId(), newId(), newId()];
      for (const id of ids) await backend.write(id, text());
      expect(await backend.list()).toEqual([...ids].sort());
    });

    it('reads back what was written, and undefined or false for ids it does not hold', async () => {
      const { backend } = await make();
      const id = newId();
      const t = text();
      await backend.write(id, t);
      expect(await backend.read(id)).toBe(t);
      const missing = newId();
      expect(await backend.read(missing)).toBeUndefined();
      expect(await backend.delete(missing)).toBe(false);
      expect(await backend.list()).toEqual([id]);
    });

    it('replaces a record whole on a second write', async () => {
      const { backend } = await make();
      const id = newId();
      await backend.write(id, text(100_000));
      const short = text(10);
      await backend.write(id, short);
      expect(await backend.read(id)).toBe(short);
      expect(await backend.list()).toEqual([id]);
    });

    it('deletes a record: gone from read and list, a second delete false', async () => {
      const { backend } = await make();
      const [a, b] = [newId(), newId()];
      await backend.write(a, text());
      await backend.write(b, text());
      expect(await backend.delete(a)).toBe(true);
      expect(await backend.read(a)).toBeUndefined();
      expect(await backend.list()).toEqual([b]);
      expect(await backend.delete(a)).toBe(false);
    });

    it('takes two writers at once: each record whole, one write of a shared id wins whole', async () => {
      const h = await make();
      const other = h.reopen ? await h.reopen() : h.backend;
      const shared = newId();
      const mine = Array.from({ length: 10 }, () => [newId(), text(20_000)] as const);
      const theirs = Array.from({ length: 10 }, () => [newId(), text(20_000)] as const);
      const contenders = [text(200_000), text(200_000), text(5), text(5)];
      await Promise.all([
        ...mine.map(([id, t]) => h.backend.write(id, t)),
        ...theirs.map(([id, t]) => other.write(id, t)),
        ...contenders.map((t, i) => (i % 2 ? other : h.backend).write(shared, t)),
      ]);
      for (const [id, t] of [...mine, ...theirs]) {
        expect(await h.backend.read(id)).toBe(t);
        expect(await other.read(id)).toBe(t);
      }
      expect(contenders).toContain(await h.backend.read(shared));
      expect(await h.backend.list()).toHaveLength(21);
      expect(await h.debris?.()).toEqual(h.debris ? [] : undefined);
    });

    it('keeps its records for another backend on the same storage', async () => {
      const h = await make();
      if (!h.reopen) throw new Error(`${name}: its harness cannot reopen it`);
      const [a, b] = [newId(), newId()];
      const [ta, tb] = [text(), text()];
      await h.backend.write(a, ta);
      await h.backend.write(b, tb);
      await h.backend.write(b, ta);
      await h.backend.delete(a);
      const next = await h.reopen();
      expect(await next.list()).toEqual([b]);
      expect(await next.read(b)).toBe(ta);
    });

    it('leaves nothing half-written after a failed write', async () => {
      const h = await make();
      if (!h.breakWrite) throw new Error(`${name}: its harness cannot break a write`);
      const kept = newId();
      const tk = text();
      await h.backend.write(kept, tk);
      const id = newId();
      const undo = await h.breakWrite(id);
      await expect(h.backend.write(id, text(50_000))).rejects.toThrow();
      await undo();
      expect(await h.backend.read(id)).toBeUndefined();
      expect(await h.backend.list()).toEqual([kept]);
      expect(await h.backend.read(kept)).toBe(tk);
      expect(await h.debris?.()).toEqual(h.debris ? [] : undefined);
      // and it writes again once the cause is gone
      await h.backend.write(id, tk);
      expect(await h.backend.read(id)).toBe(tk);
    });
  });
}
