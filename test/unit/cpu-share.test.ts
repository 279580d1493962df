/**
 * Long work on the main thread in shared slices (src/internal/cpu-share.ts): however many tasks
 * run at once, one turn of the event loop runs steps for at most `SLICE_MS` of them together; a
 * short task started behind a long one is not kept waiting for the long one's end; a task's value
 * and error come back. And the bytes of one turn (`TurnBudget`): spent, they say so until the
 * next turn, where whoever waited goes on.
 */
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { inSlices, SLICE_MS, TurnBudget } from '../../src/internal/cpu-share.js';

/** Holds the thread for `ms` milliseconds (a step of real work). */
function spin(ms: number) {
  const t = performance.now();
  while (performance.now() - t < ms);
}

/** Counts the turns of the event loop until stopped: `now()` is the current turn's number. */
function turns() {
  let n = 0;
  let on = true;
  const next = () => {
    n++;
    if (on) setImmediate(next);
  };
  setImmediate(next);
  return { now: () => n, stop: () => (on = false) };
}

describe('inSlices', () => {
  it("gives back the task's value, and its error", async () => {
    function* counts() {
      for (let i = 0; i < 3; i++) yield;
      return 'done';
    }
    function* fails(): Generator<void, never> {
      yield;
      throw new Error('bad step');
    }
    await expect(inSlices(counts())).resolves.toBe('done');
    await expect(inSlices(fails())).rejects.toThrow('bad step');
  });

  it('six tasks at once take no more of a turn than one does', async () => {
    const turn = turns();
    /** How many 1 ms steps ran in each turn. */
    const perTurn = new Map<number, number>();
    function* task() {
      for (let i = 0; i < 20; i++) {
        spin(1);
        perTurn.set(turn.now(), (perTurn.get(turn.now()) ?? 0) + 1);
        yield;
      }
    }
    await Promise.all(Array.from({ length: 6 }, () => inSlices(task())));
    turn.stop();
    const steps = [...perTurn.values()];
    expect(steps.reduce((a, b) => a + b)).toBe(120);
    // a step starts only while the slice lasts: SLICE_MS of 1 ms steps, and the one that ends it
    expect(Math.max(...steps)).toBeLessThanOrEqual(SLICE_MS + 1);
    expect(perTurn.size).toBeGreaterThanOrEqual(120 / (SLICE_MS + 1));
  });

  it('a short task started behind a long one ends long before it', async () => {
    let longSteps = 0;
    function* long() {
      for (let i = 0; i < 200; i++) {
        spin(1);
        longSteps++;
        yield;
      }
    }
    function* short() {
      for (let i = 0; i < 3; i++) {
        spin(1);
        yield;
      }
    }
    const first = inSlices(long());
    await tick();
    let stepsWhenShortEnded = -1;
    await inSlices(short()).then(() => (stepsWhenShortEnded = longSteps));
    await first;
    expect(stepsWhenShortEnded).toBeGreaterThan(0);
    // at most a few slices of the long one ran before the short one's three steps
    expect(stepsWhenShortEnded).toBeLessThan(4 * (SLICE_MS + 1));
  });
});

describe('TurnBudget', () => {
  it('says when a turn is spent, and calls those who wait in the next turn, once', async () => {
    await tick();
    const budget = new TurnBudget(100);
    expect(budget.spend(60)).toBe(true);
    expect(budget.spend(39)).toBe(true);
    expect(budget.spend(1)).toBe(false);
    let went = 0;
    budget.nextTurn(() => went++);
    budget.nextTurn(() => went++);
    expect(went).toBe(0);
    await tick();
    expect(went).toBe(2);
    expect(budget.spend(99)).toBe(true);
    await tick();
    await tick();
    expect(went).toBe(2);
  });

  it('is reset once a turn, before those who wait go on: what they spend counts for that turn', async () => {
    await tick();
    const budget = new TurnBudget(100);
    budget.spend(100);
    budget.spend(1); // the turn is reset once, however often it was spent in
    const spent: boolean[] = [];
    budget.nextTurn(() => spent.push(budget.spend(100)));
    setImmediate(() => spent.push(budget.spend(1))); // later in that same turn
    await tick();
    await tick();
    expect(spent).toEqual([false, false]);
  });

  it('pauses a stream that spent the turn and resumes it in the next, if it still may', async () => {
    await tick();
    const budget = new TurnBudget(100);
    const stream = (paused = false) => {
      const calls: string[] = [];
      return {
        calls,
        pause: () => ((paused = true), calls.push('pause')),
        resume: () => ((paused = false), calls.push('resume')),
        isPaused: () => paused,
      };
    };
    const under = stream();
    budget.pace(under, 100 - 1, () => true);
    expect(under.calls).toEqual([]); // the turn's bytes not spent: read on
    const spending = stream();
    const held = stream();
    const stopped = stream(true); // paused by its owner: theirs to resume
    let may = true;
    budget.pace(spending, 1, () => true);
    budget.pace(held, 1, () => may);
    budget.pace(stopped, 1, () => true);
    expect(spending.calls).toEqual(['pause']);
    expect(held.calls).toEqual(['pause']);
    may = false;
    await tick();
    expect(spending.calls).toEqual(['pause', 'resume']);
    expect(held.calls).toEqual(['pause']);
    expect(stopped.calls).toEqual([]);
  });
});
