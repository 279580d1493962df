/**
 * Waiting in the browser tools: for a navigation an action started (one that begins within a
 * short grace period after it counts as its own, and must finish loading), for `browser_navigate`
 * and `browser_navigate_back`, and for a text to appear or go (`browser_wait_for`). Every wait is
 * a deadline or a poll of ../../../internal/deadline.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { raceDeadline, until } from '../../../internal/deadline.js';
import { fail, type PageConnection } from './connection.js';

/** Longest wait of a navigation or `browser_wait_for`, in ms. */
export const NAV_TIMEOUT_MS = 30_000;
/** How long after an action a navigation it started is waited for, in ms. */
const ACTION_NAV_TIMEOUT_MS = 10_000;
/** How soon after an action a navigation must start to count as started by it, in ms. */
const NAV_GRACE_MS = 150;
const WAIT_TIMEOUT_MS = 30_000;

export interface NavigationWatch {
  /**
   * Waits for the navigation the action started: one that began within the grace period (or
   * `expect`ed) must finish loading, up to `timeoutMs`.
   */
  settle(opts?: { expect?: boolean; timeoutMs?: number }): Promise<void>;
}

/** Watches the current tab for a navigation an action may start (`settle` waits for it). */
export function watchNavigation(c: PageConnection): NavigationWatch {
  const sid = c.sessionId;
  let started = false;
  let onStopped!: () => void;
  const stopped = new Promise<void>((resolve) => (onStopped = resolve));
  const offs = [
    c.cdp.on('Page.frameStartedLoading', (_p, s) => {
      if (s === sid) started = true;
    }),
    c.cdp.on('Page.frameStoppedLoading', (_p, s) => {
      if (s === sid && started) onStopped();
    }),
  ];
  return {
    settle: async ({ expect = false, timeoutMs = ACTION_NAV_TIMEOUT_MS } = {}) => {
      try {
        if (!started) await sleep(NAV_GRACE_MS);
        if (!started && !expect) return;
        await raceDeadline(stopped, timeoutMs);
      } finally {
        for (const off of offs) off();
      }
    },
  };
}

/** Navigates the current tab; a dialog the old page opens (`beforeunload`) ends the wait. */
export async function navigate(c: PageConnection, url: string): Promise<void> {
  await c.act(async () => {
    const nav = watchNavigation(c);
    const r = await c.send<{ errorText?: string; loaderId?: string }>(
      'Page.navigate',
      { url },
      NAV_TIMEOUT_MS,
    );
    if (r.errorText) {
      await nav.settle();
      throw fail(`Navigation to ${url} failed: ${r.errorText}`, 'navigation_failed');
    }
    await nav.settle({ expect: r.loaderId !== undefined, timeoutMs: NAV_TIMEOUT_MS });
  });
}

/** Goes back one entry of the current tab's history. */
export async function back(c: PageConnection): Promise<void> {
  const { currentIndex, entries } = await c.send<{
    currentIndex: number;
    entries: { id: number }[];
  }>('Page.getNavigationHistory');
  const entry = entries[currentIndex - 1];
  if (!entry) throw fail('There is no previous page in this tab', 'no_history');
  await c.act(async () => {
    const nav = watchNavigation(c);
    await c.send('Page.navigateToHistoryEntry', { entryId: entry.id });
    await nav.settle({ timeoutMs: NAV_TIMEOUT_MS });
  });
}

/** Waits `time` seconds (at most 60), then for `text` to appear and `textGone` to go. */
export async function waitFor(
  c: PageConnection,
  opts: { text?: string; textGone?: string; time?: number },
): Promise<void> {
  if (opts.time !== undefined) await sleep(Math.min(opts.time, 60) * 1000);
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  const has = (t: string) =>
    c.eval<boolean>(`(document.body?.innerText ?? '').includes(${JSON.stringify(t)})`);
  for (const [text, present] of [
    [opts.text, true],
    [opts.textGone, false],
  ] as const) {
    if (text === undefined) continue;
    const seen = await until(async () => (await has(text).catch(() => !present)) === present, {
      timeoutMs: deadline - Date.now(),
      intervalMs: 200,
    });
    if (!seen) {
      throw fail(
        `Timed out after ${WAIT_TIMEOUT_MS / 1000} s waiting for ${JSON.stringify(text)} to ${present ? 'appear' : 'disappear'}`,
        'wait_timeout',
      );
    }
  }
}
