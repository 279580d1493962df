/**
 * Long work on the server's main thread, done in slices that together take at most `SLICE_MS`
 * of each turn of the event loop, however many such tasks run at once.
 *
 * A task that yields on its own every few milliseconds still stalls everyone when several run:
 * the callbacks of `setImmediate` queued in one turn all run in the next, so six clients' 90 MiB
 * commands each checked in 4 ms slices (chromium/command.ts) kept the thread 24 ms a turn before
 * it read a socket again, and a loaded machine stretched that to a `/livez` p99 over 100 ms. Here
 * the tasks share one slice a turn: each turn of the loop runs steps of the task at the head of the
 * queue until the slice is spent (then of the next, if it ended), and the task that was running
 * when the slice ran out goes to the back, so that a short task is not kept behind a long one for
 * more than one turn per task ahead of it. The next turn starts after the event loop has polled for
 * I/O. A task is a generator whose every `yield` is a point where it may be paused (a step should
 * be well under a millisecond).
 */

/** Main-thread time the tasks together take in one turn of the event loop. */
export const SLICE_MS = 4;

interface Task {
  steps: Generator<void, unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

const tasks: Task[] = [];
let scheduled = false;

/** Runs `steps` to its end in the shared slices; resolves with what it returns. */
export function inSlices<T>(steps: Generator<void, T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    tasks.push({ steps, resolve: resolve as (value: unknown) => void, reject });
    if (!scheduled) {
      scheduled = true;
      setImmediate(runSlice);
    }
  });
}

/** One turn's slice: steps of the task at the head until it ends or the slice is spent. */
function runSlice(): void {
  const until = performance.now() + SLICE_MS;
  while (tasks.length > 0 && performance.now() < until) {
    const task = tasks[0]!;
    let step: IteratorResult<void, unknown>;
    try {
      step = task.steps.next();
    } catch (err) {
      tasks.shift();
      task.reject(err);
      continue;
    }
    if (step.done) {
      tasks.shift();
      task.resolve(step.value);
    }
  }
  scheduled = tasks.length > 0;
  if (!scheduled) return;
  tasks.push(tasks.shift()!); // the task the slice ran out on goes last
  setImmediate(runSlice);
}

/** What `TurnBudget.pace` needs of a readable stream. */
export interface Pausable {
  pause(): unknown;
  resume(): unknown;
  isPaused(): boolean;
}

/**
 * The bytes of clients' data the main thread works through in one turn of the event loop, all
 * connections together. Node reads each ready socket up to 32 times in one poll of the loop: six
 * clients sending long frames at full speed gave it 12 MiB to unmask and copy before it looked at
 * anything else, 20 ms of one turn on an idle machine and a `/livez` p99 over 100 ms on a loaded
 * one. A reader that finds this turn's bytes spent stops reading its socket and goes on in the
 * next turn (`nextTurn`; `pace` does both for a stream), after the loop has polled for I/O
 * again; every reader is then served in turn, each at most one socket read past the budget.
 */
export class TurnBudget {
  #spent = 0;
  #armed = false;
  #next: (() => void)[] = [];

  constructor(readonly perTurn: number) {}

  /** Counts `bytes` worked through now; false once this turn's are spent (wait for `nextTurn`). */
  spend(bytes: number): boolean {
    this.#spent += bytes;
    this.#arm();
    return this.#spent < this.perTurn;
  }

  /** Calls `go` in the next turn of the event loop, after its poll for I/O. */
  nextTurn(go: () => void): void {
    this.#next.push(go);
    this.#arm();
  }

  /**
   * Counts `bytes` read from `stream`; once this turn's are spent, pauses `stream` and resumes
   * it in the next turn if `mayResume()` says so then (a stream paused by someone else is left
   * to them).
   */
  pace(stream: Pausable, bytes: number, mayResume: () => boolean): void {
    if (this.spend(bytes) || stream.isPaused()) return;
    stream.pause();
    this.nextTurn(() => {
      if (mayResume()) stream.resume();
    });
  }

  #arm(): void {
    if (this.#armed) return;
    this.#armed = true;
    setImmediate(() => {
      this.#armed = false;
      this.#spent = 0;
      for (const go of this.#next.splice(0)) go();
    });
  }
}

/**
 * The bytes the server's main thread works through a turn from the connections that carry the
 * most: what `cdp_url` clients send (chromium/unmask.ts) and what Chromium writes to its DevTools
 * pipe (chromium/pipe.ts), together.
 */
export const bytesPerTurn = new TurnBudget(1024 * 1024);
