/** `burrow serve`'s log lines: readable on a terminal, pino's JSON otherwise (src/cli/log-format.ts). */
import { describe, expect, it } from 'vitest';
import { prettyLine, serveLogDestination } from '../../src/cli/log-format.js';

const tty = { isTTY: true, write: () => true } as unknown as NodeJS.WriteStream;
const pipe = { isTTY: false, write: () => true } as unknown as NodeJS.WriteStream;

describe('serve log format', () => {
  it('a pino line becomes time, level, message and key=value fields', () => {
    const line = JSON.stringify({
      level: 40,
      time: Date.UTC(2026, 0, 2, 3, 4, 5),
      pid: 1,
      hostname: 'h',
      instance: 'inst_1',
      req: { method: 'POST', url: '/v1/start' },
      msg: 'instance expired',
    });
    expect(prettyLine(line)).toBe(
      '03:04:05 WARN  instance expired instance=inst_1 POST /v1/start\n',
    );
  });

  it('an error shows its message, and its stack from level error on', () => {
    const line = JSON.stringify({
      level: 50,
      time: 0,
      err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' },
      msg: 'failed',
    });
    expect(prettyLine(line)).toBe(
      '00:00:00 ERROR failed err=boom\n    Error: boom\n        at x\n',
    );
  });

  it('text that is not JSON passes unchanged', () => {
    expect(prettyLine('plain')).toBe('plain\n');
  });

  it('pretty on a terminal, JSON (no destination) otherwise; BURROW_LOG_FORMAT overrides', () => {
    expect(serveLogDestination({}, tty)).toBeDefined();
    expect(serveLogDestination({}, pipe)).toBeUndefined();
    expect(serveLogDestination({ BURROW_LOG_FORMAT: 'json' }, tty)).toBeUndefined();
    expect(serveLogDestination({ BURROW_LOG_FORMAT: 'pretty' }, pipe)).toBeDefined();
    expect(() => serveLogDestination({ BURROW_LOG_FORMAT: 'xml' }, pipe)).toThrow(/json or pretty/);
  });
});
