/**
 * The notebook thread's entry (notebook-thread.ts starts it): runs each operation it is sent on
 * the file's bytes (notebook-ops.ts) and sends back the result, its bytes moved, not copied.
 */
import { parentPort } from 'node:worker_threads';
import { runNotebookOp, type NotebookOp } from './notebook-ops.js';

interface Job {
  seq: number;
  file: Uint8Array;
  req: NotebookOp;
}

const port = parentPort;
if (port) {
  port.on('message', ({ seq, file, req }: Job) => {
    let result;
    try {
      result = runNotebookOp(file, req);
    } catch (err) {
      result = { failed: 'invalid' as const, message: (err as Error).message };
    }
    const moved: ArrayBuffer[] = [];
    if ('write' in result && result.write) moved.push(result.write.buffer as ArrayBuffer);
    if ('answer' in result && result.answer) moved.push(result.answer.buffer as ArrayBuffer);
    port.postMessage({ seq, result }, moved);
  });
}
