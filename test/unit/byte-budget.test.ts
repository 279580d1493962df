/**
 * The budget of bytes held at once (src/internal/byte-budget.ts): what fits is granted at once,
 * what does not waits its turn in order, a request larger than the whole budget is served alone,
 * and a wait past its bound fails holding nothing.
 */
import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../../src/internal/byte-budget.js';

const timeout = () => new Error('waited too long');
/** Whether `p` has settled after the pending callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('ByteBudget', () => {
  it('grants what fits at once, and makes the rest wait until bytes are given back', async () => {
    const budget = new ByteBudget(100);
    const a = await budget.take(60, 10_000, timeout);
    const b = budget.take(50, 10_000, timeout);
    expect(await settled(b)).toBe(false);
    expect(budget.used).toBe(60);
    a();
    a(); // idempotent
    const giveB = await b;
    expect(budget.used).toBe(50);
    giveB();
    expect(budget.used).toBe(0);
  });

  it('serves in order: a small request does not pass a large one waiting before it', async () => {
    const budget = new ByteBudget(100);
    const a = await budget.take(60, 10_000, timeout);
    const big = budget.take(80, 10_000, timeout);
    const small = budget.take(10, 10_000, timeout);
    expect(await settled(small)).toBe(false);
    a();
    (await big)();
    (await small)();
    expect(budget.used).toBe(0);
  });

  it('serves a request larger than the whole budget alone', async () => {
    const budget = new ByteBudget(100);
    const a = await budget.take(10, 10_000, timeout);
    const huge = budget.take(500, 10_000, timeout);
    expect(await settled(huge)).toBe(false);
    a();
    const giveHuge = await huge;
    expect(budget.used).toBe(100);
    const next = budget.take(1, 10_000, timeout);
    expect(await settled(next)).toBe(false);
    giveHuge();
    (await next)();
  });

  it('fails a wait past its bound, holding nothing, and lets the ones behind it in', async () => {
    const budget = new ByteBudget(100);
    const a = await budget.take(90, 10_000, timeout);
    const late = budget.take(50, 20, timeout);
    const small = budget.take(10, 10_000, timeout);
    await expect(late).rejects.toThrow('waited too long');
    const giveSmall = await small; // it fits beside `a` once `late` left the queue
    expect(budget.used).toBe(100);
    a();
    giveSmall();
    expect(budget.used).toBe(0);
  });

  it('takes at once only what fits with nobody waiting before, or nothing', async () => {
    const budget = new ByteBudget(100);
    const a = budget.tryTake(60)!;
    expect(budget.used).toBe(60);
    expect(budget.tryTake(50)).toBeUndefined();
    expect(budget.used).toBe(60);
    const waiting = budget.take(50, 10_000, timeout);
    // 10 would fit, but it does not pass the one waiting
    expect(budget.tryTake(10)).toBeUndefined();
    a();
    const b = await waiting;
    b();
    b(); // idempotent
    expect(budget.used).toBe(0);
  });

  it('lets a waiter whose signal aborts leave the line at once, and the ones behind it in', async () => {
    const budget = new ByteBudget(100);
    const a = budget.tryTake(90)!;
    const gone = new AbortController();
    const big = budget.take(50, 10_000, timeout, gone.signal);
    const small = budget.take(10, 10_000, timeout);
    gone.abort(new Error('client gone'));
    await expect(big).rejects.toThrow('client gone');
    const giveSmall = await small;
    expect(budget.used).toBe(100);
    await expect(budget.take(1, 10_000, timeout, gone.signal)).rejects.toThrow('client gone');
    a();
    giveSmall();
    expect(budget.used).toBe(0);
  });
});
