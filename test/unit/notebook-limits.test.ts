/**
 * What the server decodes of a notebook file an instance wrote (issue 35: an outside tester's
 * 54.6 MiB notebook of 200,000 cells cost 1.1–2.9 s of main thread per read): at most
 * `MAX_NOTEBOOK_CONTAINERS` objects and arrays, counted before anything is decoded, refused with
 * `NotebookTooLarge`; no operation writes a notebook past the bounds; strings, however long, are
 * skipped by the nesting check in native steps.
 */
import { describe, expect, it } from 'vitest';
import { jsonNestingOffset } from '../../src/internal/json-bounded.js';
import {
  MAX_NOTEBOOK_BYTES,
  MAX_NOTEBOOK_CONTAINERS,
  NotebookTooLarge,
  parseNotebook,
} from '../../src/server/ubuntu/kernels/nbformat.js';
import { runNotebookOp } from '../../src/server/ubuntu/kernels/notebook-ops.js';

const MiB = 1024 * 1024;
/** A notebook of `n` code cells of 3 containers each (cell, metadata, outputs), as the tester's. */
const cells = (n: number) =>
  JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {},
    cells: Array.from({ length: n }, (_, i) => ({
      cell_type: 'code',
      id: `c${i}`,
      metadata: {},
      execution_count: 1,
      source: 'x = 1',
      outputs: [],
    })),
  });

describe('notebook limits', () => {
  it('are 8 MiB and 50,000 objects and arrays', () => {
    expect(MAX_NOTEBOOK_BYTES).toBe(8 * MiB);
    expect(MAX_NOTEBOOK_CONTAINERS).toBe(50_000);
  });

  it('a notebook at the container bound is read, one past it is refused as too large', () => {
    // 3 containers for the notebook, its metadata and its cells, 3 per cell
    const fits = Math.floor((MAX_NOTEBOOK_CONTAINERS - 3) / 3);
    expect(parseNotebook(cells(fits)).cells).toHaveLength(fits);
    const over = cells(fits + 1);
    expect(() => parseNotebook(over)).toThrow(NotebookTooLarge);
    expect(() => parseNotebook(over)).toThrow(/more than 50000 objects and arrays/);
    // the tester's notebook
    expect(() => parseNotebook(cells(200_000))).toThrow(NotebookTooLarge);
  });

  it('an invalid notebook under the bound is still invalid, not too large', () => {
    let err: unknown;
    try {
      parseNotebook('{"nbformat":4}');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(NotebookTooLarge);
  });

  it('long strings of outputs (images) are read, with brackets, quotes and backslashes inside', () => {
    const png = Buffer.alloc(3 * MiB, 7).toString('base64');
    const tricky = 'a[{"\\\\"}]\\"[[{'.repeat(1000);
    const nb = JSON.stringify({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [
        {
          cell_type: 'code',
          id: 'a',
          metadata: {},
          execution_count: 1,
          source: tricky,
          outputs: [{ output_type: 'display_data', metadata: {}, data: { 'image/png': png } }],
        },
      ],
    });
    const parsed = parseNotebook(nb);
    expect(parsed.cells[0]!.source).toBe(tricky);
  });

  it('an operation that would write a notebook past the bounds fails and writes nothing', () => {
    // as the instance wrote it, 3 objects and arrays a cell; as the server writes it, 4 (the
    // source as a list of lines)
    const file = new TextEncoder().encode(cells(15_000));
    const got = runNotebookOp(file, { op: 'get', id: 'n' });
    expect('answer' in got && got.answer!.byteLength).toBeGreaterThan(0);
    expect('write' in got && got.write).toBe(false);
    const added = runNotebookOp(file, {
      op: 'addCell',
      type: 'code',
      content: '1',
      metadata: undefined,
    });
    expect(added).toEqual({
      failed: 'too_large',
      message: expect.stringMatching(/would be more than 50000 objects.*; not written/),
    });
    const small = runNotebookOp(new TextEncoder().encode(cells(10)), {
      op: 'addCell',
      type: 'code',
      content: '1',
      metadata: undefined,
    });
    expect('write' in small && small.write!.byteLength).toBeGreaterThan(0);
  });

  it('a file past the bounds is refused by the operations, an invalid one as invalid', () => {
    const over = runNotebookOp(new TextEncoder().encode(cells(20_000)), { op: 'check' });
    expect(over).toMatchObject({ failed: 'too_large' });
    expect(
      runNotebookOp(new TextEncoder().encode('{"nbformat":4}'), { op: 'check' }),
    ).toMatchObject({ failed: 'invalid' });
  });

  it('the nesting check skips strings: escaped quotes and backslashes do not end them', () => {
    expect(jsonNestingOffset('[["[[[["]]', 2)).toBe(-1);
    expect(jsonNestingOffset('[["\\"[[["]]', 2)).toBe(-1);
    expect(jsonNestingOffset('[["\\\\"[[]]]', 2)).toBe(6);
    expect(jsonNestingOffset('["\\\\\\"[[["]', 1)).toBe(-1);
    expect(jsonNestingOffset('"unterminated [[[', 0)).toBe(-1);
    expect(jsonNestingOffset('[{}]', 1)).toBe(1);
    expect(jsonNestingOffset(`["${'x'.repeat(1000)}",[[]]]`, 2)).toBe(1005);
  });
});
