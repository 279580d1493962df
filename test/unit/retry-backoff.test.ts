/** The retry of failed background work (src/internal/backoff.ts): doubling waits, capped, reset. */
import { describe, expect, it } from 'vitest';
import { RetryBackoff } from '../../src/internal/backoff.js';

describe('RetryBackoff', () => {
  it('waits 1 s, then twice as long each time up to a minute, and starts over after a success', () => {
    const b = new RetryBackoff();
    const waits = Array.from({ length: 8 }, () => b.schedule(() => {}));
    expect(waits).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
    expect(b.pending).toBe(true);
    b.succeeded();
    expect(b.schedule(() => {})).toBe(1_000);
    b.cancel();
    expect(b.pending).toBe(false);
  });

  it('runs the retry once its wait is over, and not at all once cancelled', async () => {
    const b = new RetryBackoff(5, 50);
    let runs = 0;
    b.schedule(() => runs++);
    await new Promise((r) => setTimeout(r, 40));
    expect(runs).toBe(1);
    expect(b.pending).toBe(false);
    b.schedule(() => runs++); // waits 10 ms
    b.cancel();
    await new Promise((r) => setTimeout(r, 40));
    expect(runs).toBe(1);
  });
});
