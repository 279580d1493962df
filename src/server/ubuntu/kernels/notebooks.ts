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
  NbOutput,
  Notebook,
  NotebookCell,
} from '../../../api/index.js';
import { HttpError, serverError } from '../../errors.js';
import type { NotebookCapability } from '../../instances/runtime.js';
import type { SandboxFiles } from '../../toolbox/files.js';
import { ToolboxError } from '../../toolbox/toolbox.js';
import {
  ensureCellIds,
  kernelNameOf,
  MAX_NOTEBOOK_BYTES,
  newCell,
  newNotebook,
  NotebookTooLarge,
  parseNotebook,
  serializeNotebook,
  toWireCell,
  toWireNotebook,
  type FileCell,
  type FileNotebook,
} from './nbformat.js';
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

  /** Read and parse a notebook; upgrades it to stable cell ids on disk when it had none. */
  async #read(id: string): Promise<FileNotebook> {
    if (!NOTEBOOK_ID.test(id)) throw serverError('notebook_not_found', { id });
    let text: string;
    try {
      text = (await this.#files.read(this.path(id), MAX_NOTEBOOK_BYTES)).data.toString('utf8');
    } catch (err) {
      const code = err instanceof ToolboxError ? err.code : '';
      if (['ENOENT', 'EISDIR', 'ENOTDIR', 'NOT_REGULAR', 'ELOOP'].includes(code)) {
        throw serverError('notebook_not_found', { id });
      }
      if (code === 'TOO_LARGE') {
        // refused on its size before a byte of it is read
        throw serverError('notebook_too_large', {
          id,
          reason: `over ${MAX_NOTEBOOK_BYTES} bytes, the largest notebook file the server reads`,
        });
      }
      throw fileError(err, id);
    }
    let nb: FileNotebook;
    try {
      nb = parseNotebook(text);
    } catch (err) {
      if (err instanceof NotebookTooLarge) {
        throw serverError('notebook_too_large', { id, reason: err.message });
      }
      throw serverError('notebook_invalid', { id, reason: (err as Error).message });
    }
    if (ensureCellIds(nb)) await this.#write(id, nb);
    return nb;
  }

  async #write(id: string, nb: FileNotebook): Promise<void> {
    try {
      await this.#files.write(this.path(id), serializeNotebook(nb));
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

  async get(notebookId: string): Promise<Notebook> {
    return this.#locked(notebookId, async () =>
      toWireNotebook(notebookId, await this.#read(notebookId)),
    );
  }

  async delete(notebookId: string): Promise<Record<string, unknown>> {
    await this.#locked(notebookId, async () => {
      await this.#read(notebookId);
      await this.#files.remove(this.path(notebookId)).catch((err: unknown) => {
        if (!(err instanceof ToolboxError && err.code === 'ENOENT'))
          throw fileError(err, notebookId);
      });
    });
    await this.#pool.shutdown(notebookKernelKey(notebookId));
    return { status: 'success', message: `Deleted notebook ${notebookId}` };
  }

  async addCell(notebookId: string, req: z.output<typeof AddCellRequest>): Promise<NotebookCell> {
    return this.#locked(notebookId, async () => {
      const nb = await this.#read(notebookId);
      const taken = new Set(nb.cells.map((c) => c.id ?? ''));
      const cell = newCell(req.type, req.content, req.metadata, taken);
      nb.cells.push(cell);
      await this.#write(notebookId, nb);
      return toWireCell(cell);
    });
  }

  async executeCell(
    notebookId: string,
    cellId: string,
    opts: z.output<typeof ExecuteCellRequest>,
  ): Promise<NotebookCell> {
    const { cell, kernelName } = await this.#locked(notebookId, async () => {
      const nb = await this.#read(notebookId);
      const found = nb.cells.find((c) => c.id === cellId);
      if (!found) throw serverError('cell_not_found', { cell: cellId, notebook: notebookId });
      return { cell: found, kernelName: kernelNameOf(nb) };
    });
    if (cell.cell_type !== 'code') return toWireCell(cell); // nothing to run
    const result = await this.#run(notebookId, kernelName, cell, opts.timeout);
    return this.#record(notebookId, cellId, result);
  }

  async execute(
    notebookId: string,
    opts: z.output<typeof ExecuteCellRequest>,
  ): Promise<NotebookCell[]> {
    const { cells, kernelName } = await this.#locked(notebookId, async () => {
      const nb = await this.#read(notebookId);
      return {
        cells: nb.cells.filter((c) => c.cell_type === 'code'),
        kernelName: kernelNameOf(nb),
      };
    });
    const restarted = new Set<string>();
    for (const cell of cells) {
      const result = await this.#run(notebookId, kernelName, cell, opts.timeout);
      const recorded = await this.#record(notebookId, cell.id ?? '', result);
      if (recorded.kernel_restarted) restarted.add(recorded.id);
      if (result.status !== 'ok') break; // stop at the first failing cell, as Jupyter's Run All
    }
    return this.#locked(notebookId, async () => {
      const nb = await this.#read(notebookId);
      return nb.cells.map((c) => {
        const wire = toWireCell(c);
        if (restarted.has(wire.id)) wire.kernel_restarted = true;
        return wire;
      });
    });
  }

  #run(id: string, kernelName: string, cell: FileCell, timeout: number | undefined) {
    const source = typeof cell.source === 'string' ? cell.source : cell.source.join('');
    return this.#pool.run(notebookKernelKey(id), kernelName, source, timeout);
  }

  /** Store a result in the cell's outputs and execution count; the cell as the API returns it. */
  #record(id: string, cellId: string, result: RunResult): Promise<NotebookCell> {
    return this.#locked(id, async () => {
      const nb = await this.#read(id);
      const cell = nb.cells.find((c) => c.id === cellId);
      if (!cell) throw serverError('cell_not_found', { cell: cellId, notebook: id });
      cell.outputs = result.outputs as NbOutput[];
      cell.execution_count = result.execution_count;
      await this.#write(id, nb);
      const wire = toWireCell(cell);
      if (result.restarted) wire.kernel_restarted = true;
      return wire;
    });
  }
}
