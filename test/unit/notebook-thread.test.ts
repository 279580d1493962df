/**
 * The notebook thread (ubuntu/kernels/notebook-thread.ts): operations on a notebook file's bytes
 * run in a worker thread, one at a time, their answers come back as bytes; a thread that dies
 * fails the operation it had and another is started for the next.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { EncodedJson } from '../../src/internal/encoded-json.js';
import {
  NotebookThread,
  NotebookThreadDied,
} from '../../src/server/ubuntu/kernels/notebook-thread.js';

const thread = new NotebookThread();
afterAll(() => thread.stop());

const file = (cells: number) =>
  new TextEncoder().encode(
    JSON.stringify({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: { title: 'T' },
      cells: Array.from({ length: cells }, (_, i) => ({
        cell_type: 'code',
        id: `c${i}`,
        metadata: {},
        source: `x = ${i}`,
        outputs: [],
        execution_count: null,
      })),
    }),
  );

describe('the notebook thread', () => {
  it('answers an operation with its JSON as bytes, and the file it was sent is moved there', async () => {
    const bytes = file(3);
    const result = await thread.run((op) => op(bytes, { op: 'get', id: 'nb' }));
    expect(bytes.byteLength).toBe(0); // moved, not copied
    expect('answer' in result && result.answer).toBeInstanceOf(Uint8Array);
    const answer = new EncodedJson<{ name: string; cells: { content: string }[] }>(
      (result as { answer: Uint8Array }).answer,
    ).value();
    expect(answer.name).toBe('T');
    expect(answer.cells.map((c) => c.content)).toEqual(['x = 0', 'x = 1', 'x = 2']);
  }, 60_000);

  it('runs operations one at a time, in order', async () => {
    const order: number[] = [];
    await Promise.all(
      [0, 1, 2].map((n) =>
        thread.run(async (op) => {
          order.push(n);
          await op(file(1000), { op: 'check' });
          order.push(n);
        }),
      ),
    );
    expect(order).toEqual([0, 0, 1, 1, 2, 2]);
  }, 60_000);

  it('fails the operation of a thread that dies, and starts another for the next', async () => {
    const died = thread.run((op) => {
      const pending = op(file(20_000), { op: 'get', id: 'nb' });
      void thread.stop(); // the thread ends with the operation in it
      return pending;
    });
    await expect(died).rejects.toBeInstanceOf(NotebookThreadDied);
    const after = await thread.run((op) => op(file(1), { op: 'get', id: 'nb' }));
    expect('answer' in after).toBe(true);
  }, 60_000);
});
