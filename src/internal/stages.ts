/**
 * Stage timings of one instance start: the instance's start runs inside `traceStages`, and any
 * step of it, however deep (the sandbox's disk, the anchor, Chromium's launch), wraps its work in
 * `stage(name, work)`. Outside a traced start `stage` only runs the work. The registry logs the
 * result at debug level (`BURROW_LOG_LEVEL=debug`, docs/configuration.md): where a cold start
 * spends its time, on the machine it runs on.
 *
 * Stages may overlap (the egress opens beside the type's own start); each is reported with when
 * it began after the start and how long it took.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';

export interface StageTiming {
  name: string;
  /** ms from the start of the trace to the stage's beginning. */
  at: number;
  /** How long the stage took, in ms. */
  ms: number;
}

export class StageTrace {
  readonly #t0 = performance.now();
  readonly #stages: StageTiming[] = [];

  record(name: string, began: number): void {
    this.#stages.push({ name, at: began - this.#t0, ms: performance.now() - began });
  }

  /** Every stage recorded so far, by beginning. */
  get stages(): StageTiming[] {
    return [...this.#stages].sort((a, b) => a.at - b.at);
  }

  /** ms since the trace began. */
  elapsed(): number {
    return performance.now() - this.#t0;
  }

  /** One line: `name +at ms` per stage, rounded. */
  summary(): string {
    return this.stages
      .map((s) => `${s.name} ${s.ms.toFixed(1)} ms (+${s.at.toFixed(0)})`)
      .join(', ');
  }
}

const current = new AsyncLocalStorage<StageTrace>();

/** Run `work` with `trace` collecting the stages of everything it starts. */
export function traceStages<T>(trace: StageTrace, work: () => Promise<T>): Promise<T> {
  return current.run(trace, work);
}

/** Time `work` as stage `name` of the traced start it belongs to, if any. */
export async function stage<T>(name: string, work: () => Promise<T> | T): Promise<T> {
  const trace = current.getStore();
  if (!trace) return work();
  const began = performance.now();
  try {
    return await work();
  } finally {
    trace.record(name, began);
  }
}

/** Run `work` outside any traced start (background work a start only set off). */
export function untraced<T>(work: () => T): T {
  return current.exit(work);
}

/** Record a stage that began at `began` (a `performance.now()`) and ends now. */
export function stageSince(name: string, began: number): void {
  current.getStore()?.record(name, began);
}
