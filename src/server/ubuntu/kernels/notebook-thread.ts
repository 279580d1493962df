/**
 * The notebook thread: one worker thread for the whole server that decodes, changes and encodes
 * notebook files (notebook-ops.ts), so that no notebook an instance writes costs the main thread
 * more than moving its bytes (issue 35: an outside tester's 54.6 MiB notebook of 200,000 cells
 * held the main thread 1.1–2.9 s per read and took RSS from 99 to 638 MiB).
 *
 * Decisions:
 * - One operation at a time, every instance's together, from reading the file to the answer
 *   (`NotebookThread.run`): the server holds the bytes of one notebook file being decoded, and
 *   the thread's heap, at most `NOTEBOOK_THREAD_HEAP_MB`. Others wait their turn, in order.
 * - A thread that dies (its heap full, a bug) fails the operation it had (400
 *   `notebook_too_large`: only a notebook at the bounds can fill the heap) and is started again
 *   for the next one.
 * - Run from the TypeScript sources (tests, `tsx`), the thread loads its entry through `tsx`.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { SerialQueue } from '../../../internal/serial.js';
import type { NotebookOp, OpFailure, OpResult } from './notebook-ops.js';

/** The notebook thread's old-generation heap: several times what the largest notebook decodes to. */
export const NOTEBOOK_THREAD_HEAP_MB = 256;

/** The thread died with the operation in flight. */
export class NotebookThreadDied extends Error {
  override name = 'NotebookThreadDied';
}

interface Pending {
  resolve(result: OpResult | OpFailure): void;
  reject(err: Error): void;
}

/** Starts the thread whose entry is `./<entry>.js` beside this module, its heap `heapMb`. */
export function startWorker(entry = 'notebook-worker', heapMb = NOTEBOOK_THREAD_HEAP_MB): Worker {
  const here = import.meta.url;
  const options = { resourceLimits: { maxOldGenerationSizeMb: heapMb } };
  if (!here.endsWith('.ts')) return new Worker(new URL(`./${entry}.js`, here), options);
  const source = new URL(`./${entry}.ts`, here).href;
  // tsx's ESM entry of its API (a require() resolution would give its CommonJS one)
  const tsxPackage = createRequire(here).resolve('tsx/package.json');
  const tsx = pathToFileURL(join(dirname(tsxPackage), 'dist/esm/api/index.mjs')).href;
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(source)}); })`;
  return new Worker(boot, { ...options, eval: true });
}

export class NotebookThread {
  readonly #queue = new SerialQueue();
  #worker: Worker | undefined;
  readonly #pending = new Map<number, Pending>();
  #seq = 0;

  /**
   * Runs `task` in the thread's turn (one at a time, server-wide): it reads the file and hands
   * its bytes to `op`, which runs them through the thread.
   */
  run<T>(
    task: (op: (file: Uint8Array, req: NotebookOp) => Promise<OpResult | OpFailure>) => Promise<T>,
  ): Promise<T> {
    return this.#queue.run(() => task((file, req) => this.#post(file, req)));
  }

  #post(file: Uint8Array, req: NotebookOp): Promise<OpResult | OpFailure> {
    const worker = this.#ensure();
    const seq = ++this.#seq;
    return new Promise<OpResult | OpFailure>((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject });
      // the file's bytes are moved to the thread when they are a buffer of their own
      const whole = file.byteOffset === 0 && file.byteLength === file.buffer.byteLength;
      const moved = whole && file.buffer instanceof ArrayBuffer ? [file.buffer] : [];
      worker.postMessage({ seq, file, req }, moved);
    });
  }

  #ensure(): Worker {
    if (this.#worker) return this.#worker;
    const worker = startWorker();
    worker.unref();
    worker.on('message', ({ seq, result }: { seq: number; result: OpResult | OpFailure }) => {
      const pending = this.#pending.get(seq);
      this.#pending.delete(seq);
      pending?.resolve(result);
    });
    const died = (err: Error) => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      for (const pending of this.#pending.values())
        pending.reject(new NotebookThreadDied(err.message));
      this.#pending.clear();
    };
    worker.on('error', died);
    worker.on('exit', (code) => died(new Error(`the notebook thread exited (${code})`)));
    this.#worker = worker;
    return worker;
  }

  /** Ends the thread (the server's stop); the next operation starts another. */
  async stop(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    for (const pending of this.#pending.values()) pending.reject(new NotebookThreadDied('stopped'));
    this.#pending.clear();
    await worker?.terminate();
  }
}

/** The server's notebook thread. */
export const notebookThread = new NotebookThread();
