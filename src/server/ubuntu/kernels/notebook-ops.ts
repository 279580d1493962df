/**
 * What a notebook operation does with the file's bytes, from the bytes to the bytes: decode and
 * check the file (nbformat.ts, within its bounds), change it, and encode both the file to write
 * back and the JSON answer. These run in the notebook thread (notebook-worker.ts), never on the
 * server's main thread: the file is the instance's, and even within the bounds a notebook can
 * take a hundred milliseconds or more to decode and encode (100,000 short lines, 6,600 cells).
 * What crosses back is bytes (moved, not copied) and, for a cell to run, its source.
 */
import type { NbOutput, NotebookCell, NotebookCellType } from '../../../api/index.js';
import {
  ensureCellIds,
  kernelNameOf,
  newCell,
  notebookOverBounds,
  NotebookTooLarge,
  parseNotebook,
  serializeNotebook,
  toWireCell,
  toWireNotebook,
  type FileNotebook,
} from './nbformat.js';

/** What the main thread asks of the notebook thread. */
export type NotebookOp =
  | { op: 'get'; id: string }
  | { op: 'check' }
  | {
      op: 'addCell';
      type: NotebookCellType;
      content: string;
      metadata: Record<string, unknown> | undefined;
    }
  | { op: 'cell'; cellId: string }
  | { op: 'codeCells' }
  | {
      op: 'record';
      cellId: string;
      /** The execution's outputs as JSON (UTF-8): decoded here, off the main thread. */
      outputs: Uint8Array;
      execution_count: number | null;
      restarted: boolean;
    }
  | { op: 'cells'; restarted: string[] };

/** A cell to run, as the main thread needs it. */
export interface CellToRun {
  id: string;
  type: NotebookCellType;
  source: string;
}

/** The answer: bytes to write back (when the file changed), a JSON answer, a small value. */
export interface OpResult {
  write?: Uint8Array;
  answer?: Uint8Array;
  value?: { kernelName: string; cells: CellToRun[] } | { missing: true };
}

/** Why an operation failed; the main thread answers with the matching error. */
export interface OpFailure {
  failed: 'too_large' | 'invalid';
  message: string;
}

const encoder = new TextEncoder();
const encode = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));

const toRun = (cell: FileNotebook['cells'][number]): CellToRun => ({
  id: cell.id ?? '',
  type: cell.cell_type,
  source: typeof cell.source === 'string' ? cell.source : cell.source.join(''),
});

/** Run one operation on a notebook file's bytes. */
export function runNotebookOp(file: Uint8Array, req: NotebookOp): OpResult | OpFailure {
  let nb: FileNotebook;
  try {
    nb = parseNotebook(new TextDecoder().decode(file));
  } catch (err) {
    const failed = err instanceof NotebookTooLarge ? 'too_large' : 'invalid';
    return { failed, message: (err as Error).message };
  }
  // the server writes no notebook it would refuse to read back
  const write = () => {
    const text = serializeNotebook(nb);
    const bytes = encoder.encode(text);
    const over = notebookOverBounds(text, bytes.byteLength);
    if (over) throw new NotebookTooLarge(`would be ${over} once written; not written`);
    return bytes;
  };
  try {
    // a file without stable cell ids is written back with them, whatever the operation
    return afterParse(nb, req, ensureCellIds(nb), write);
  } catch (err) {
    if (!(err instanceof NotebookTooLarge)) throw err;
    return { failed: 'too_large', message: err.message };
  }
}

function afterParse(
  nb: FileNotebook,
  req: NotebookOp,
  upgraded: boolean,
  write: () => Uint8Array,
): OpResult {
  const out: OpResult = upgraded ? { write: write() } : {};
  switch (req.op) {
    case 'check':
      return out;
    case 'get':
      return { ...out, answer: encode(toWireNotebook(req.id, nb)) };
    case 'addCell': {
      const taken = new Set(nb.cells.map((c) => c.id ?? ''));
      const cell = newCell(req.type, req.content, req.metadata, taken);
      nb.cells.push(cell);
      return { write: write(), answer: encode(toWireCell(cell)) };
    }
    case 'cell': {
      const cell = nb.cells.find((c) => c.id === req.cellId);
      if (!cell) return { ...out, value: { missing: true } };
      const wire = cell.cell_type === 'code' ? undefined : encode(toWireCell(cell));
      const value = { kernelName: kernelNameOf(nb), cells: [toRun(cell)] };
      return { ...out, ...(wire ? { answer: wire } : {}), value };
    }
    case 'codeCells':
      return {
        ...out,
        value: {
          kernelName: kernelNameOf(nb),
          cells: nb.cells.filter((c) => c.cell_type === 'code').map(toRun),
        },
      };
    case 'record': {
      const cell = nb.cells.find((c) => c.id === req.cellId);
      if (!cell) return { ...out, value: { missing: true } };
      cell.outputs = JSON.parse(new TextDecoder().decode(req.outputs)) as NbOutput[];
      cell.execution_count = req.execution_count;
      const wire: NotebookCell = toWireCell(cell);
      if (req.restarted) wire.kernel_restarted = true;
      return { write: write(), answer: encode(wire) };
    }
    case 'cells': {
      const restarted = new Set(req.restarted);
      const cells = nb.cells.map((c) => {
        const wire = toWireCell(c);
        if (restarted.has(wire.id)) wire.kernel_restarted = true;
        return wire;
      });
      return { ...out, answer: encode(cells) };
    }
  }
}
