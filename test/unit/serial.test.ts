/** src/internal/serial.ts: one task at a time, in order; a failure stays with its own task. */
import { describe, expect, it } from 'vitest';
import { KeyedSerialQueue, SerialQueue } from '../../src/internal/serial.js';

/** A promise settled from outside. */
function gate<T = void>() {
  let open!: (v: T) => void;
  let fail!: (e: unknown) => void;
  const promise = new Promise<T>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

/** Lets every queued microtask (and promise reaction chain) run. */
const settle = () => new Promise<void>((r) => setImmediate(r));

describe('SerialQueue', () => {
  it('runs tasks one at a time, in the order they were queued', async () => {
    const q = new SerialQueue();
    const log: string[] = [];
    const first = gate();
    const a = q.run(async () => {
      log.push('a start');
      await first.promise;
      log.push('a end');
      return 'A';
    });
    const b = q.run(() => {
      log.push('b');
      return 'B';
    });
    await settle();
    expect(log).toEqual(['a start']);
    expect(q.size).toBe(2);
    first.open();
    expect(await Promise.all([a, b])).toEqual(['A', 'B']);
    expect(log).toEqual(['a start', 'a end', 'b']);
    expect(q.size).toBe(0);
  });

  it('does not let a failing task poison the queue', async () => {
    const q = new SerialQueue();
    const boom = new Error('boom');
    const a = q.run(() => Promise.reject(boom));
    const b = q.run(() => {
      throw new TypeError('sync');
    });
    const c = q.run(async () => 'still runs');
    await expect(a).rejects.toBe(boom);
    await expect(b).rejects.toThrow(TypeError);
    await expect(c).resolves.toBe('still runs');
    expect(q.size).toBe(0);
  });

  it('starts a task only after the one before it has settled, even when it rejects', async () => {
    const q = new SerialQueue();
    const first = gate();
    let started = false;
    const a = q.run(() => first.promise);
    const b = q.run(() => {
      started = true;
    });
    await settle();
    expect(started).toBe(false);
    first.fail(new Error('late failure'));
    await expect(a).rejects.toThrow('late failure');
    await b;
    expect(started).toBe(true);
  });

  it('calls tasks without arguments (not with the previous outcome)', async () => {
    const q = new SerialQueue();
    await q.run(() => 'previous');
    await expect(q.run((...args: unknown[]) => args.length)).resolves.toBe(0);
  });
});

describe('KeyedSerialQueue', () => {
  it('serialises per key and runs different keys concurrently', async () => {
    const q = new KeyedSerialQueue<string>();
    const log: string[] = [];
    const x1 = gate();
    const a = q.run('x', async () => {
      log.push('x1 start');
      await x1.promise;
      log.push('x1 end');
    });
    const b = q.run('x', () => void log.push('x2'));
    const c = q.run('y', () => void log.push('y1'));
    await c;
    expect(log).toEqual(['x1 start', 'y1']);
    expect(q.size).toBe(1); // y is done and forgotten; x is busy
    x1.open();
    await Promise.all([a, b]);
    expect(log).toEqual(['x1 start', 'y1', 'x1 end', 'x2']);
    await settle();
    expect(q.size).toBe(0);
  });

  it('keeps a key after a failure and forgets it once idle', async () => {
    const q = new KeyedSerialQueue<number>();
    const a = q.run(1, () => Promise.reject(new Error('no')));
    const b = q.run(1, () => 'yes');
    await expect(a).rejects.toThrow('no');
    await expect(b).resolves.toBe('yes');
    await settle();
    expect(q.size).toBe(0);
    await expect(q.run(1, () => 'again')).resolves.toBe('again');
  });
});
