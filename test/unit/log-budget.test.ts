import { describe, expect, it } from 'vitest';
import { boundedLogger } from '../../src/internal/log-budget.js';
import type { Logger } from '../../src/internal/log.js';

function recorder(): { log: Logger; lines: { level: string; obj: unknown; msg?: string }[] } {
  const lines: { level: string; obj: unknown; msg?: string }[] = [];
  const at = (level: string) => (obj: object | string, msg?: string) =>
    void lines.push({ level, obj, ...(msg !== undefined && { msg }) });
  return {
    lines,
    log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
  };
}

describe('boundedLogger', () => {
  it('writes the first lines of a kind, then one summary per window with the count', () => {
    const { log, lines } = recorder();
    let t = 0;
    const b = boundedLogger(log, {
      perKind: 3,
      windowMs: 1000,
      now: () => t,
      bindings: { instance: 'i' },
    });
    for (let i = 0; i < 10; i++) b.warn({ code: 'busy', n: i });
    b.info({ other: 1 }, 'other kind');
    expect(lines.map((l) => l.obj)).toEqual([
      { code: 'busy', n: 0 },
      { code: 'busy', n: 1 },
      { code: 'busy', n: 2 },
      { other: 1 },
    ]);
    t = 1000;
    b.warn({ code: 'busy', n: 10 });
    expect(lines).toHaveLength(6);
    expect(lines[4]).toMatchObject({ level: 'warn', obj: { instance: 'i', log_dropped: 7 } });
    expect(lines[5]!.obj).toEqual({ code: 'busy', n: 10 });
    b.flush();
    expect(lines).toHaveLength(6); // nothing dropped since
  });

  it('bounds each level in all and the number of kinds', () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 5, total: 7, maxKinds: 2, now: () => 0 });
    for (let i = 0; i < 50; i++) b.error({ [`k${i}`]: i });
    expect(lines).toHaveLength(7);
    for (let i = 0; i < 5; i++) b.debug('debug lines have their own count');
    expect(lines).toHaveLength(12);
    b.flush();
    expect(lines[12]).toMatchObject({ level: 'error', obj: { log_dropped: 43 } });
    // kinds past the second are one kind per level
    expect(
      Object.keys((lines[12]!.obj as { log_dropped_kinds: object }).log_dropped_kinds),
    ).toContain('error (other kinds)');
  });

  it('writes the summary when the window ends, without another line', async () => {
    const { log, lines } = recorder();
    const b = boundedLogger(log, { perKind: 1, windowMs: 20 });
    b.warn('x');
    b.warn('x');
    await expect.poll(() => lines.length, { timeout: 2000 }).toBe(2);
    expect(lines[1]!.obj).toMatchObject({ log_dropped: 1 });
  });
});
