/** Work repeated while something runs (src/internal/repeat.ts): paused between runs, stopped. */
import { describe, expect, it } from 'vitest';
import { repeat } from '../../src/internal/repeat.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('repeat', () => {
  it('runs after each pause, never two runs at once, until the signal aborts', async () => {
    const stop = new AbortController();
    let runs = 0;
    let running = 0;
    let overlapped = false;
    const done = repeat(
      async () => {
        runs++;
        running++;
        overlapped ||= running > 1;
        await sleep(15); // longer than the pause: the next run waits for this one
        running--;
      },
      5,
      stop.signal,
    );
    expect(runs).toBe(0); // the first run comes after one pause
    await sleep(120);
    stop.abort();
    await done;
    const seen = runs;
    expect(seen).toBeGreaterThan(1);
    expect(overlapped).toBe(false);
    await sleep(40);
    expect(runs).toBe(seen);
  });

  it('stops when a run answers false, and at once when already aborted', async () => {
    let runs = 0;
    await repeat(() => ++runs < 3, 1, new AbortController().signal);
    expect(runs).toBe(3);
    const aborted = new AbortController();
    aborted.abort();
    await repeat(() => runs++, 1, aborted.signal);
    expect(runs).toBe(3);
  });

  it('rejects with the error of a run that threw', async () => {
    const boom = new Error('boom');
    await expect(
      repeat(
        () => {
          throw boom;
        },
        1,
        new AbortController().signal,
      ),
    ).rejects.toBe(boom);
  });
});
