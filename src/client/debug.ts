/**
 * Debug output of the client and the bridge, off unless asked for with `BURROW_LOG=debug` or a
 * `DEBUG` list naming burrow (`DEBUG=burrow*`, `DEBUG=burrow:client`, `DEBUG=*`). Lines go to
 * stderr as `burrow:<area> <text>`: every API call (method, path, status, milliseconds) and every
 * step of opening a session, with the session's live-view URL. Paths never carry the API key, and
 * `token=` values are redacted before they get here. Read at each call, so a test or a REPL can
 * switch it on at any time.
 */

/** `DEBUG` entries that select `burrow:<area>`: `*`, `burrow*`, `burrow:*`, `burrow:<area>`. */
function debugListSelects(list: string, area: string): boolean {
  let on = false;
  for (const raw of list.split(/[\s,]+/)) {
    if (!raw) continue;
    const negated = raw.startsWith('-');
    const pattern = negated ? raw.slice(1) : raw;
    const re = new RegExp(
      `^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`,
    );
    if (re.test(`burrow:${area}`) || (pattern === 'burrow' && !negated)) on = !negated;
  }
  return on;
}

/** Whether debug output of `area` (`client`, `session`) is on. */
export function debugEnabled(area: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.BURROW_LOG === 'debug') return true;
  return env.DEBUG ? debugListSelects(env.DEBUG, area) : false;
}

/** Writes one debug line of `area` when it is on. */
export function debug(area: string, text: string | (() => string)): void {
  if (!debugEnabled(area)) return;
  process.stderr.write(`burrow:${area} ${typeof text === 'function' ? text() : text}\n`);
}
