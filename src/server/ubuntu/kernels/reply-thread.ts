/**
 * The kernel-reply thread: one worker thread for the whole server that decodes the kernel
 * bridges' long reply lines (reply-decode.ts), so that what an instance prints through its
 * kernels costs the main thread only moving bytes (attack5 A2: 950,000 empty objects in one
 * displayed output held it 0.4–0.8 s per execution).
 *
 * Decisions:
 * - Lines are decoded in arrival order, one at a time, every instance's together; the thread's
 *   heap is at most `REPLY_THREAD_HEAP_MB`, several times what the largest allowed line decodes to.
 * - A thread that dies (its heap full, a bug) fails the lines it had (`BadReply`: a protocol
 *   break, as a line too costly to decode) and is started again for the next one.
 */
import type { Worker } from 'node:worker_threads';
import { startWorker } from './notebook-thread.js';
import { BadReply, type DecodedReply } from './reply-decode.js';

export const REPLY_THREAD_HEAP_MB = 256;

interface Pending {
  resolve(reply: DecodedReply): void;
  reject(err: Error): void;
}

interface Answer {
  seq: number;
  reply?: DecodedReply;
  bad?: string;
}

export class ReplyThread {
  #worker: Worker | undefined;
  readonly #pending = new Map<number, Pending>();
  #seq = 0;

  /** The reply `line` holds, decoded in the thread; `BadReply` when it is not one. */
  decode(line: string): Promise<DecodedReply> {
    const worker = this.#ensure();
    const seq = ++this.#seq;
    return new Promise<DecodedReply>((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject });
      worker.postMessage({ seq, line });
    });
  }

  #ensure(): Worker {
    if (this.#worker) return this.#worker;
    const worker = startWorker('reply-worker', REPLY_THREAD_HEAP_MB);
    worker.unref();
    worker.on('message', ({ seq, reply, bad }: Answer) => {
      const pending = this.#pending.get(seq);
      this.#pending.delete(seq);
      if (reply) pending?.resolve(reply);
      else pending?.reject(new BadReply(bad ?? 'no reply'));
    });
    const died = (err: Error) => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      for (const pending of this.#pending.values()) {
        pending.reject(new BadReply(`decoding it ended the kernel-reply thread (${err.message})`));
      }
      this.#pending.clear();
    };
    worker.on('error', died);
    worker.on('exit', (code) => died(new Error(`the kernel-reply thread exited (${code})`)));
    this.#worker = worker;
    return worker;
  }

  /** Ends the thread; the next line starts another. */
  async stop(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    for (const pending of this.#pending.values()) pending.reject(new BadReply('stopped'));
    this.#pending.clear();
    await worker?.terminate();
  }
}

/** The server's kernel-reply thread. */
export const replyThread = new ReplyThread();
