/**
 * The bound on what one instance can make the server log (src/internal/log-budget.ts), at its
 * edges, as the operator reads the log: exactly `total` lines of a level per window; a kind is
 * the shape of the line (its fields in any order, its text's first 80 characters), so values an
 * instance chooses make no new kinds; at most `maxKinds` kinds; the summary names the kinds that
 * dropped the most, at the highest level dropped in its own window, and says what was bounded;
 * it is written when the window ends, not before, and a flush at stop starts a window of its own.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { boundedLogger } from '../../src/internal/log-budget.js';
import type { Logger } from '../../src/internal/log.js';

interface Line {
  level: string;
  obj: unknown;
  msg?: string;
}

function recorder(): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (obj: object | string, msg?: string) =>
    void lines.push({ level, obj, ...(msg !== undefined && { msg }) });
  return {
    lines,
    log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
  };
}

const summaries = (lines: Line[]) =>
  lines.filter((l) => typeof l.obj === 'object' && l.obj !== null && 'log_dropped' in l.obj);

afterEach(() => {
  vi.useRealTimers();
});

describe('what is written', () => {
  it('exactly `total` lines of a level per window, with their message', () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 100, total: 3, now: () => 0 });
    for (let i = 0; i < 6; i++) b.warn({ n: i }, 'refused');
    expect(lines).toEqual([0, 1, 2].map((n) => ({ level: 'warn', obj: { n }, msg: 'refused' })));
    b.flush();
    expect(summaries(lines)).toHaveLength(1);
    expect(summaries(lines)[0]!.obj).toMatchObject({ log_dropped: 3 });
  });

  it('one kind whatever the order of the fields, or the text past its 80th character', () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, now: () => 0 });
    b.warn({ a: 1, b: 2 }, 'm');
    b.warn({ b: 3, a: 4 }, 'm');
    const long = 'y'.repeat(80);
    b.info(`${long} chosen by the instance: 1`);
    b.info(`${long} chosen by the instance, at more length: 2`);
    expect(lines.map((l) => l.obj)).toEqual([{ a: 1, b: 2 }, `${long} chosen by the instance: 1`]);
  });

  it('other kinds: other field names, other text', () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, now: () => 0 });
    b.warn({ ab: 1, c: 2 }, 'm');
    b.warn({ a: 1, bc: 2 }, 'm');
    b.warn('one');
    b.warn('two');
    expect(lines).toHaveLength(4);
  });

  it('at most `maxKinds` kinds; the rest are one kind', () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, maxKinds: 2, now: () => 0 });
    for (const k of ['k1', 'k2', 'k3', 'k4', 'k5']) b.warn({ [k]: 1 });
    expect(lines.map((l) => l.obj)).toEqual([{ k1: 1 }, { k2: 1 }, { k3: 1 }]);
    b.flush();
    expect(summaries(lines)[0]!.obj).toMatchObject({
      log_dropped: 2,
      log_dropped_kinds: { 'warn (other kinds)': 2 },
    });
  });
});

describe('the summary', () => {
  it('names the 8 kinds that dropped the most, most first, and counts all', () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, windowMs: 60_000, now: () => 0 });
    // kind k<i> dropped i times
    for (let i = 1; i <= 10; i++) for (let j = 0; j <= i; j++) b.info({ [`k${i}`]: j });
    b.flush();
    const [summary] = summaries(lines);
    expect(summary).toMatchObject({
      level: 'info',
      msg: 'log: 55 similar lines dropped in 60 s (bounded per instance)',
    });
    const kinds = (summary!.obj as { log_dropped_kinds: Record<string, number> }).log_dropped_kinds;
    expect(Object.entries(kinds)).toEqual(
      [10, 9, 8, 7, 6, 5, 4, 3].map((i) => [`info  {k${i}}`, i]),
    );
  });

  it('says the window in seconds', () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, windowMs: 5_000, now: () => 0 });
    b.warn('x');
    b.warn('x');
    b.flush();
    expect(summaries(lines)[0]!.msg).toBe(
      'log: 1 similar lines dropped in 5 s (bounded per instance)',
    );
  });

  it('is at the highest level dropped, in each window anew', () => {
    const { log, lines } = recorder();
    let t = 0;
    const b = boundedLogger(log, { perKind: 1, windowMs: 1000, now: () => t });
    for (const level of ['error', 'info'] as const) {
      b[level]('x');
      b[level]('x');
    }
    b.flush();
    expect(summaries(lines).map((l) => l.level)).toEqual(['error']);
    t = 2000;
    b.info('y');
    b.info('y');
    b.flush();
    expect(summaries(lines).map((l) => l.level)).toEqual(['error', 'info']);
  });

  it('is written when the window ends, not before, with no line after', () => {
    vi.useFakeTimers({ now: 0 });
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, windowMs: 1000 });
    vi.advanceTimersByTime(300);
    b.warn('x');
    b.warn('x');
    vi.advanceTimersByTime(699);
    expect(summaries(lines)).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(summaries(lines)).toHaveLength(1);
  });

  it('a flush (the instance stops) starts a window: the old one ending later changes nothing', () => {
    vi.useFakeTimers({ now: 0 });
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, windowMs: 1000 });
    b.warn('x');
    b.warn('x'); // dropped: the summary is due at 1000
    vi.advanceTimersByTime(500);
    b.flush(); // a window from 500 to 1500
    b.warn('x');
    vi.advanceTimersByTime(600); // 1100: past the first window's end, within this one
    b.warn('x');
    expect(lines.filter((l) => l.obj === 'x')).toHaveLength(2);
  });
});
