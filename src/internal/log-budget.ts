/**
 * A logger whose lines are bounded in number, for everything one instance (or a page in it, or a
 * `cdp_url` holder) can make the server log. Those lines are written to the operator's disk or
 * journal; without a bound, an instance that repeats what is logged (a connection past the
 * egress's cap, a refused address, a download) fills that disk at the speed it can repeat it.
 *
 * Lines are grouped by kind: level, message and the names of the object's fields (the shape of
 * the line the code writes, never the values an instance chose). In each window (default 60 s)
 * the first `perKind` lines of a kind and at most `total` lines of each level are written as they are;
 * the rest are counted, and one summary line per window (at the highest level dropped) says how
 * many of each kind were dropped. Kinds are bounded too: past `maxKinds`, new kinds count as one
 * per level.
 * So one instance writes at most `4 × total + 1` lines per window (`total + 1` at the default
 * level, info), whatever it does.
 */
import type { Logger } from './log.js';

type Level = 'debug' | 'info' | 'warn' | 'error';
const RANK: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

export interface LogBudget {
  /** Lines written of one kind per window (default 20). */
  readonly perKind?: number;
  /**
   * Lines written of each level per window, summaries aside (default 200): counted per level, so
   * that debug lines an operator does not keep never use up what a warning may write.
   */
  readonly total?: number;
  /** The window, in milliseconds (default 60,000). */
  readonly windowMs?: number;
  /** Kinds told apart; later ones are counted as one (default 64). */
  readonly maxKinds?: number;
  /** Whose lines these are, as the summary line names it (default `instance`). */
  readonly per?: string;
  /** Fields every summary line carries (e.g. `{ instance: id }`). */
  readonly bindings?: Readonly<Record<string, unknown>>;
  /** The clock (tests). Default `Date.now`. */
  readonly now?: () => number;
}

export const DEFAULT_LOG_BUDGET = { perKind: 20, total: 200, windowMs: 60_000, maxKinds: 64 };

/** Kinds shown by name in a summary line; the rest are in its total. */
const SUMMARY_KINDS = 8;

/** A bounded logger over `log`. `flush()` writes the pending summary at once (instance stop). */
export interface BoundedLogger extends Logger {
  flush(): void;
}

export function boundedLogger(log: Logger, budget: LogBudget = {}): BoundedLogger {
  const { perKind, total, windowMs, maxKinds } = { ...DEFAULT_LOG_BUDGET, ...budget };
  const now = budget.now ?? Date.now;
  let windowStart = now();
  const written: Record<Level, number> = { debug: 0, info: 0, warn: 0, error: 0 };
  const counts = new Map<string, number>();
  const dropped = new Map<string, number>();
  let droppedLevel: Level = 'debug';
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (dropped.size > 0) {
      const all = [...dropped].sort((a, b) => b[1] - a[1]);
      const n = all.reduce((sum, [, c]) => sum + c, 0);
      const kinds = Object.fromEntries(all.slice(0, SUMMARY_KINDS));
      log[droppedLevel](
        { ...budget.bindings, log_dropped: n, log_dropped_kinds: kinds },
        `log: ${n} similar lines dropped in ${Math.round(windowMs / 1000)} s (bounded per ${budget.per ?? 'instance'})`,
      );
    }
    dropped.clear();
    counts.clear();
    for (const level of Object.keys(written) as Level[]) written[level] = 0;
    droppedLevel = 'debug';
    windowStart = now();
  };

  const kindOf = (level: Level, obj: object | string, msg?: string): string => {
    const fields = typeof obj === 'string' ? '' : Object.keys(obj).sort().join(',');
    const text = typeof obj === 'string' ? obj : (msg ?? '');
    const kind = `${level} ${text.slice(0, 80)} {${fields}}`;
    return counts.has(kind) || counts.size < maxKinds ? kind : `${level} (other kinds)`;
  };

  const write =
    (level: Level) =>
    (obj: object | string, msg?: string): void => {
      if (now() - windowStart >= windowMs) flush();
      const kind = kindOf(level, obj, msg);
      const seen = counts.get(kind) ?? 0;
      counts.set(kind, seen + 1);
      if (seen < perKind && written[level] < total) {
        written[level]++;
        if (msg === undefined) log[level](obj);
        else log[level](obj, msg);
        return;
      }
      dropped.set(kind, (dropped.get(kind) ?? 0) + 1);
      if (RANK[level] > RANK[droppedLevel]) droppedLevel = level;
      // the summary is written when the window ends, even if the instance has gone quiet
      timer ??= setTimeout(flush, Math.max(0, windowStart + windowMs - now())).unref();
    };

  return {
    debug: write('debug'),
    info: write('info'),
    warn: write('warn'),
    error: write('error'),
    flush,
  };
}
