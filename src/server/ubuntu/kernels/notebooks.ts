/**
 * Notebooks of an ubuntu instance. The `.ipynb` file is the source of truth: every operation
 * reads `<home>/notebooks/<id>.ipynb` and writes it back atomically, so Jupyter tools, the file
 * tools and bash see the same notebook (outputs and execution counts included), and a notebook
 * file put there by other means (upload, bash) is served under its file name's stem.
 *
 * Decisions:
 * - The id is the file name's stem, made from the name (`"Sales 2024"` → `Sales-2024`, then
 *   `Sales-2024-2` …), so agents find their notebooks by name in the home directory.
 * - Each notebook has its own kernel (kernelspec `kernel_name`), started on its first
 *   execution with the home directory as working directory; its cells share its state.
 *   Deleting the notebook shuts the kernel down.
 * - Executing all cells runs the code cells in order and **stops at the first cell that does
 *   not finish `ok`** (an error, a timeout or a dead kernel), like Jupyter's "Run All" and
 *   nbclient; later cells keep their previous outputs. The answer lists every cell of the
 *   notebook. `timeout` applies to each cell.
 * - A cell whose kernel had to be restarted (state lost) comes back with `kernel_restarted:
 *   true`; that flag is not stored in the file.
 * - The files are read, written (atomically: temp file, fsync, rename) and deleted inside the
 *   sandbox as the instance's user (the toolbox, ../../toolbox/toolbox.ts): a `notebooks`
 *   directory or `.ipynb` file that is a symlink leads where it leads inside the instance, never
 *   to the host.
 */
import { posix } from 'node:path';
import type { z } from 'zod';
import type {
  AddCellRequest,
  ExecuteCellRequest,
  KernelInfo,
  Notebook,
  NotebookCell,
} from '../../../api/index.js';
import { HttpError, serverError } from '../../errors.js';
import type { NotebookCapability } from '../../instances/runtime.js';
import type { SandboxFiles } from '../../toolbox/files.js';
import { ToolboxError } from '../../toolbox/toolbox.js';
import { EncodedJson } from '../../../internal/encoded-json.js';
import {
  MAX_NOTEBOOK_BYTES,
  newNotebook,
  serializeNotebook,
  toWireNotebook,
  type FileNotebook,
} from './nbformat.js';
import type { CellToRun, NotebookOp, OpFailure, OpResult } from './notebook-ops.js';
import { NOTEBOOK_THREAD_HEAP_MB, NotebookThreadDied, notebookThread } from './notebook-thread.js';
import type { KernelPool, RunResult } from './pool.js';

/** Notebook ids are file name stems: no path separators, no leading dot. */
const NOTEBOOK_ID = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

export const notebookKernelKey = (id: string) => `notebook:${id}`;

export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z0-9_-]+/g, '-')
    .replace(/^[-]+|[-]+$/g, '')
    .slice(0, 64)
    .replace(/-+$/, '');
  return slug || 'notebook';
}

/** A failed file operation as the HTTP error the route answers with. */
function fileError(err: unknown, id: string): Error {
  if (err instanceof HttpError) return err;
  if (err instanceof ToolboxError) {
    if (err.code === 'ENOSPC' || err.code === 'EDQUOT') {
      return serverError('disk_full', { reason: `notebooks/${id}.ipynb: ${err.message}` });
    }
    return serverError('notebook_file_refused', { id, reason: err.message });
  }
  return serverError('notebook_files_unavailable', { reason: (err as Error).message });
}

export class Notebooks implements NotebookCapability {
  readonly #pool: KernelPool;
  readonly #files: SandboxFiles;
  /** Sandbox path of `<home>/notebooks`. */
  readonly dir: string;
  /** Serializes read-modify-write of one notebook file (and, under `''`, id allocation). */
  readonly #locks = new Map<string, Promise<unknown>>();
  /** Decodes, changes and encodes the files, off the main thread (one for the server). */
  readonly #thread = notebookThread;

  constructor(pool: KernelPool, files: SandboxFiles, dir: string) {
    this.#pool = pool;
    this.#files = files;
    this.dir = dir;
  }

  /** Sandbox path of a notebook's file. */
  path(id: string): string {
    return posix.join(this.dir, `${id}.ipynb`);
  }

  async #exists(id: string): Promise<boolean> {
    try {
      return (await this.#files.stat(this.path(id), false)).type !== undefined;
    } catch (err) {
      throw fileError(err, id);
    }
  }

  #locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.#locks.set(key, tail);
    void tail.then(() => {
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    });
    return next;
  }

  /** A notebook file's bytes, refused past `MAX_NOTEBOOK_BYTES` before a byte is read. */
  async #readFile(id: string): Promise<Uint8Array> {
    if (!NOTEBOOK_ID.test(id)) throw serverError('notebook_not_found', { id });
    try {
      return (await this.#files.read(this.path(id), MAX_NOTEBOOK_BYTES)).data;
    } catch (err) {
      const code = err instanceof ToolboxError ? err.code : '';
      if (['ENOENT', 'EISDIR', 'ENOTDIR', 'NOT_REGULAR', 'ELOOP'].includes(code)) {
        throw serverError('notebook_not_found', { id });
      }
      if (code === 'TOO_LARGE') {
        throw serverError('notebook_too_large', {
          id,
          reason: `over ${MAX_NOTEBOOK_BYTES} bytes, the largest notebook file the server reads`,
        });
      }
      throw fileError(err, id);
    }
  }

  /**
   * Read the notebook and run `req` on it in the notebook thread (notebook-thread.ts), one
   * operation at a time server-wide; writes back what it changed (stable cell ids included).
   */
  #op(id: string, req: NotebookOp): Promise<OpResult> {
    return this.#thread.run(async (op) => {
      let result: OpResult | OpFailure;
      try {
        result = await op(await this.#readFile(id), req);
      } catch (err) {
        if (!(err instanceof NotebookThreadDied)) throw err;
        throw serverError('notebook_too_large', {
          id,
          reason: `decoding it took more than the notebook thread's ${NOTEBOOK_THREAD_HEAP_MB} MiB (${err.message})`,
        });
      }
      if ('failed' in result) {
        const code = result.failed === 'too_large' ? 'notebook_too_large' : 'notebook_invalid';
        throw serverError(code, { id, reason: result.message });
      }
      if (result.value && 'missing' in result.value && 'cellId' in req) {
        throw serverError('cell_not_found', { cell: req.cellId, notebook: id });
      }
      if (result.write) await this.#writeBytes(id, result.write);
      return result;
    });
  }

  async #write(id: string, nb: FileNotebook): Promise<void> {
    await this.#writeBytes(id, serializeNotebook(nb));
  }

  async #writeBytes(id: string, data: string | Uint8Array): Promise<void> {
    try {
      await this.#files.write(this.path(id), data);
    } catch (err) {
      throw fileError(err, id);
    }
  }

  kernels(): Promise<KernelInfo[]> {
    return this.#pool.specs();
  }

  async create(name: string, kernelName: string): Promise<Notebook> {
    const specs = await this.#pool.specs();
    const spec = specs.find((s) => s.name === kernelName);
    if (!spec) {
      const names = specs.map((s) => s.name).join(', ');
      throw serverError('unknown_notebook_kernel', {
        name: kernelName,
        installed: names || 'none',
      });
    }
    return this.#locked('', async () => {
      const base = slugify(name);
      let id = base;
      for (let n = 2; await this.#exists(id); n++) id = `${base}-${n}`;
      const nb = newNotebook(name, spec);
      await this.#locked(id, () => this.#write(id, nb));
      return toWireNotebook(id, nb);
    });
  }

  async get(notebookId: string): Promise<EncodedJson<Notebook>> {
    return this.#locked(notebookId, async () =>
      answered<Notebook>(await this.#op(notebookId, { op: 'get', id: notebookId })),
    );
  }

  async delete(notebookId: string): Promise<Record<string, unknown>> {
    await this.#locked(notebookId, async () => {
      await this.#op(notebookId, { op: 'check' });
      await this.#files.remove(this.path(notebookId)).catch((err: unknown) => {
        if (!(err instanceof ToolboxError && err.code === 'ENOENT'))
          throw fileError(err, notebookId);
      });
    });
    await this.#pool.shutdown(notebookKernelKey(notebookId));
    return { status: 'success', message: `Deleted notebook ${notebookId}` };
  }

  async addCell(
    notebookId: string,
    req: z.output<typeof AddCellRequest>,
  ): Promise<EncodedJson<NotebookCell>> {
    return this.#locked(notebookId, async () =>
      answered<NotebookCell>(
        await this.#op(notebookId, {
          op: 'addCell',
          type: req.type,
          content: req.content,
          metadata: req.metadata,
        }),
      ),
    );
  }

  async executeCell(
    notebookId: string,
    cellId: string,
    opts: z.output<typeof ExecuteCellRequest>,
  ): Promise<EncodedJson<NotebookCell>> {
    const found = await this.#locked(notebookId, () =>
      this.#op(notebookId, { op: 'cell', cellId }),
    );
    if (found.answer) return new EncodedJson(found.answer); // not code: nothing to run
    const { kernelName, cells } = toRun(found);
    const result = await this.#run(notebookId, kernelName, cells[0]!.source, opts.timeout);
    return answered(await this.#record(notebookId, cellId, result));
  }

  async execute(
    notebookId: string,
    opts: z.output<typeof ExecuteCellRequest>,
  ): Promise<EncodedJson<NotebookCell[]>> {
    const { kernelName, cells } = toRun(
      await this.#locked(notebookId, () => this.#op(notebookId, { op: 'codeCells' })),
    );
    const restarted: string[] = [];
    for (const cell of cells) {
      const result = await this.#run(notebookId, kernelName, cell.source, opts.timeout);
      await this.#record(notebookId, cell.id, result);
      if (result.restarted) restarted.push(cell.id);
      if (result.status !== 'ok') break; // stop at the first failing cell, as Jupyter's Run All
    }
    return this.#locked(notebookId, async () =>
      answered<NotebookCell[]>(await this.#op(notebookId, { op: 'cells', restarted })),
    );
  }

  #run(id: string, kernelName: string, source: string, timeout: number | undefined) {
    return this.#pool.run(notebookKernelKey(id), kernelName, source, timeout);
  }

  /** Store a result in the cell's outputs and execution count; the cell as the API returns it. */
  #record(id: string, cellId: string, result: RunResult): Promise<OpResult> {
    return this.#locked(id, () =>
      this.#op(id, {
        op: 'record',
        cellId,
        outputs: result.outputs, // copied to the thread, decoded there
        execution_count: result.execution_count,
        restarted: Boolean(result.restarted),
      }),
    );
  }
}

/** The operation's JSON answer. */
const answered = <T>(result: OpResult): EncodedJson<T> => new EncodedJson<T>(result.answer!);

/** The cells to run and their kernel. */
function toRun(result: OpResult): { kernelName: string; cells: CellToRun[] } {
  const value = result.value;
  if (!value || 'missing' in value) throw new Error("no cells in the notebook thread's answer");
  return value;
}
