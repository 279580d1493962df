/** instances/handoffs.ts: the life of a hand-off (pending, then done, expired or cancelled), its waits. */
import { Duplex } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HttpError } from '../../src/server/errors.js';
import { Handoffs } from '../../src/server/instances/handoffs.js';

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe('Handoffs', () => {
  it('a pending hand-off has a token of its own and ends once, as done', async () => {
    const ended: string[] = [];
    const hs = new Handoffs((h) => ended.push(`${h.id}:${h.status}`));
    const a = hs.create('inst_a', 'Press the key', 60);
    const b = hs.create('inst_a', 'Another', 60);
    expect(a.token).not.toBe(b.token);
    expect(a.token.length).toBeGreaterThanOrEqual(32);
    expect(hs.pending('inst_a')).toEqual([a, b]);
    expect(hs.pending('inst_b')).toEqual([]);
    expect(a.toJSON()).toMatchObject({
      status: 'pending',
      message: 'Press the key',
      ended_at: null,
    });
    expect(Date.parse(a.toJSON().expires_at) - Date.parse(a.toJSON().created_at)).toBe(60_000);

    const waiting = hs.wait('inst_a', a.id, 30);
    expect(hs.end(a, 'done')).toBe(true);
    expect(hs.end(a, 'expired')).toBe(false); // the first end stands
    expect((await waiting).status).toBe('done');
    expect(hs.pending('inst_a')).toEqual([b]);
    expect(ended).toEqual([`${a.id}:done`]);
  });

  it('expires after its seconds, and a wait ends at its own bound first', async () => {
    const hs = new Handoffs();
    const h = hs.create('inst_a', 'm', 10);
    const short = hs.wait('inst_a', h.id, 3);
    await vi.advanceTimersByTimeAsync(3_000);
    expect((await short).status).toBe('pending');
    const long = hs.wait('inst_a', h.id, 60);
    await vi.advanceTimersByTimeAsync(7_000);
    expect((await long).status).toBe('expired');
    expect(h.endedAt).toBeDefined();
    // a wait of 0 answers at once
    expect((await hs.wait('inst_a', h.id, 0)).status).toBe('expired');
  });

  it('cancels every pending hand-off of a stopped instance, closing its sockets', async () => {
    const hs = new Handoffs();
    const h = hs.create('inst_a', 'm', 60);
    const socket = new Duplex({
      read() {},
      write(_c, _e, cb) {
        cb();
      },
    });
    hs.attach(h, socket);
    const other = hs.create('inst_b', 'm', 60);
    hs.cancelAll('inst_a');
    expect(h.status).toBe('cancelled');
    expect(other.status).toBe('pending');
    await vi.advanceTimersByTimeAsync(0);
    expect(socket.destroyed).toBe(true);
    // a socket attached after the end is closed at once
    const late = new Duplex({
      read() {},
      write(_c, _e, cb) {
        cb();
      },
    });
    hs.attach(h, late);
    expect(late.destroyed).toBe(true);
  });

  it('answers 404 naming an unknown hand-off, and keeps a bounded number of ended ones', () => {
    const hs = new Handoffs();
    const err = (() => {
      try {
        hs.get('inst_a', 'ho_nope');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(HttpError);
    expect(err).toMatchObject({ status: 404, code: 'handoff_not_found' });
    expect((err as HttpError).detail).toContain('ho_nope');

    const first = hs.create('inst_a', 'm', 60);
    hs.end(first, 'done');
    for (let i = 0; i < 60; i++) hs.end(hs.create('inst_a', 'm', 60), 'done');
    const pending = hs.create('inst_a', 'm', 60);
    expect(() => hs.get('inst_a', first.id)).toThrow(HttpError); // forgotten
    expect(hs.get('inst_a', pending.id)).toBe(pending); // pending ones are never dropped
  });
});
