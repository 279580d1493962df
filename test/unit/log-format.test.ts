/** The server's log lines: readable on a terminal, pino's JSON otherwise (src/internal/log-format.ts). */
import { describe, expect, it } from 'vitest';
import { prettyLine, serveLogDestination } from '../../src/internal/log-format.js';

const tty = { isTTY: true, write: () => true } as unknown as NodeJS.WriteStream;

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

  it('pretty on a terminal, JSON otherwise; BURROW_LOG_FORMAT overrides', () => {
    const written: string[] = [];
    const pipe = {
      isTTY: false,
      write: (l: string) => written.push(l) > 0,
    } as unknown as NodeJS.WriteStream;
    const line = JSON.stringify({ level: 30, time: 0, msg: 'hi' });
    expect(serveLogDestination({}, tty)).toBeDefined();
    serveLogDestination({}, pipe)!.write(line);
    expect(written).toEqual([line]); // JSON unchanged
    serveLogDestination({ BURROW_LOG_FORMAT: 'pretty' }, pipe)!.write(line);
    expect(written[1]).toBe('00:00:00 INFO  hi\n');
    expect(() => serveLogDestination({ BURROW_LOG_FORMAT: 'xml' }, pipe)).toThrow(/json or pretty/);
  });
});
