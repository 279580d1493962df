/**
 * How the server's log reads: JSON lines (pino's, for log collectors) unless the stream is a
 * terminal, where each line becomes `HH:MM:SS LEVEL message key=value …`. `BURROW_LOG_FORMAT`
 * (`json` or `pretty`) overrides the choice. `burrow serve` writes to stdout; the embedded
 * server of a script to stderr, so that the script's own output stays its own. Lines arrive here
 * already redacted (src/server/http/logger.ts).
 */
import { inspect } from 'node:util';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
};
const COLOURS: Record<number, string> = { 40: '\x1b[33m', 50: '\x1b[31m', 60: '\x1b[31m' };
/** pino's own fields, shown in the line's head or not at all. */
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'v']);

function value(v: unknown): string {
  if (typeof v === 'string') return /[\s"=]/.test(v) ? JSON.stringify(v) : v;
  if (v !== null && typeof v === 'object') {
    return inspect(v, { breakLength: Infinity, depth: 3, compact: true });
  }
  return String(v);
}

/** One pino JSON line as a terminal line (the line unchanged when it is not pino's JSON). */
export function prettyLine(line: string, colour = false): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const level = typeof rec.level === 'number' ? rec.level : 30;
  const time = new Date(typeof rec.time === 'number' ? rec.time : Date.now())
    .toISOString()
    .slice(11, 19);
  const fields: string[] = [];
  let stack: string | undefined;
  for (const [k, v] of Object.entries(rec)) {
    if (HIDDEN.has(k)) continue;
    if (k === 'err' && v && typeof v === 'object') {
      const err = v as { message?: string; stack?: string; type?: string };
      fields.push(`err=${value(err.message ?? err.type ?? 'error')}`);
      if (level >= 50 && err.stack) stack = err.stack;
      continue;
    }
    if (k === 'req' && v && typeof v === 'object') {
      const req = v as { method?: string; url?: string };
      fields.push(`${req.method ?? ''} ${req.url ?? ''}`.trim());
      continue;
    }
    if (k === 'res' && v && typeof v === 'object') {
      fields.push(`status=${(v as { statusCode?: number }).statusCode ?? '?'}`);
      continue;
    }
    fields.push(`${k}=${value(v)}`);
  }
  const name = LEVELS[level] ?? String(level);
  const head = colour && COLOURS[level] ? `${COLOURS[level]}${name}\x1b[0m` : name;
  const msg = typeof rec.msg === 'string' ? rec.msg : '';
  const text = [time, head, msg, ...fields].filter(Boolean).join(' ');
  return `${text}\n${stack ? `${stack.replace(/^/gm, '    ')}\n` : ''}`;
}

/**
 * The destination for `startServer`'s `logDestination` writing to `out`: pretty lines, or JSON
 * lines; undefined when that is pino's default (JSON on stdout).
 */
export function serveLogDestination(
  env: NodeJS.ProcessEnv = process.env,
  out: NodeJS.WriteStream = process.stdout,
): { write(line: string): void } | undefined {
  const format = env.BURROW_LOG_FORMAT;
  if (format !== undefined && format !== '' && format !== 'json' && format !== 'pretty') {
    throw new Error(`BURROW_LOG_FORMAT must be json or pretty, not "${format}"`);
  }
  const pretty = format === 'pretty' || (format !== 'json' && out.isTTY === true);
  if (!pretty)
    return out === process.stdout ? undefined : { write: (line) => void out.write(line) };
  const colour = out.isTTY === true && !env.NO_COLOR;
  return { write: (line: string) => void out.write(prettyLine(line, colour)) };
}
