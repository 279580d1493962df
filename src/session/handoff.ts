/**
 * `session.handoff()`: lend the instance to a person (a second factor, a CAPTCHA) and wait until
 * they press Done on the hand-off page. The page's URL goes to `onUrl`, or to stderr when there is
 * none; the wait is a series of bounded long polls (`GET …/handoff/{id}?wait_seconds=60`).
 */
import type { Handoff } from '../api/index.js';
import { MAX_HANDOFF_SECONDS, MAX_HANDOFF_WAIT_SECONDS } from '../api/index.js';
import { ConfigurationError, type Burrow } from '../client/index.js';
import { HandoffError } from './errors.js';

export interface HandoffOptions {
  /** What the person is asked to do; shown on the page. */
  message: string;
  /** How long the person has, in milliseconds (1 s to 24 h). Default: the server's, 10 minutes. */
  timeoutMs?: number;
  /** Called with the page's URL once the hand-off exists; without it, the URL is printed to stderr. */
  onUrl?: (url: string, handoff: Handoff) => void | Promise<void>;
  /** Stops waiting (the hand-off itself stays until it expires). */
  signal?: AbortSignal;
}

export interface HandoffResult {
  handoffId: string;
  /** The page the person used (its token no longer works). */
  url: string;
  status: 'done';
  /** When the person pressed Done. */
  endedAt: string;
}

function timeoutSeconds(ms: number | undefined): number | undefined {
  if (ms === undefined) return undefined;
  if (!Number.isFinite(ms) || ms < 1000 || ms > MAX_HANDOFF_SECONDS * 1000) {
    throw new ConfigurationError(
      'invalid_option',
      `handoff: timeoutMs must be between 1000 and ${MAX_HANDOFF_SECONDS * 1000}`,
    );
  }
  return Math.round(ms / 1000);
}

export async function runHandoff(
  client: Burrow,
  instanceId: string,
  opts: HandoffOptions,
): Promise<HandoffResult> {
  const seconds = timeoutSeconds(opts.timeoutMs);
  const created = await client.instances.handoff(
    instanceId,
    { message: opts.message, ...(seconds !== undefined && { timeout_seconds: seconds }) },
    { signal: opts.signal },
  );
  const url = created.url ?? '';
  if (opts.onUrl) await opts.onUrl(url, created);
  else process.stderr.write(`burrow: hand-off for a person: ${opts.message}\n  open ${url}\n`);
  for (;;) {
    const h = await client.instances.handoffStatus(
      instanceId,
      created.handoff_id,
      { wait_seconds: MAX_HANDOFF_WAIT_SECONDS },
      { signal: opts.signal },
    );
    if (h.status === 'done') {
      return { handoffId: h.handoff_id, url, status: 'done', endedAt: h.ended_at ?? '' };
    }
    if (h.status === 'expired' || h.status === 'cancelled') {
      throw new HandoffError(`handoff_${h.status}`, instanceId, h.handoff_id);
    }
  }
}
