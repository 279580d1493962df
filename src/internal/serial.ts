/**
 * Serial queues: async work that must not overlap (one computer action at a time per instance,
 * one execution at a time per kernel). Tasks run in the order they were queued; a task that
 * fails rejects only its own promise, and the next task runs as usual.
 */

/** Runs tasks one at a time, in the order `run` was called. */
export class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();
  #size = 0;

  /** Tasks queued or running. */
  get size(): number {
    return this.#size;
  }

  /**
   * Runs `task` once every task queued before it has settled; settles as `task` does. A task
   * that throws synchronously rejects its promise like one that rejects.
   */
  run<T>(task: () => T | PromiseLike<T>): Promise<T> {
    this.#size++;
    const start = () => task();
    const result = this.#tail.then(start, start);
    const settled = result.then(
      () => void this.#size--,
      () => void this.#size--,
    );
    this.#tail = settled;
    return result;
  }
}

/**
 * One serial queue per key: tasks of one key run one at a time, tasks of different keys
 * concurrently. A key's queue is dropped once it has nothing left to run.
 */
export class KeyedSerialQueue<K> {
  readonly #queues = new Map<K, SerialQueue>();

  /** Keys with tasks queued or running. */
  get size(): number {
    return this.#queues.size;
  }

  run<T>(key: K, task: () => T | PromiseLike<T>): Promise<T> {
    let queue = this.#queues.get(key);
    if (!queue) this.#queues.set(key, (queue = new SerialQueue()));
    const result = queue.run(task);
    const drop = () => {
      if (queue.size === 0 && this.#queues.get(key) === queue) this.#queues.delete(key);
    };
    void result.then(drop, drop);
    return result;
  }
}
