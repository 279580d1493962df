/** What the benchmarks share: the statistics they print, the memory figure they read, an API caller. */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { chromium, type Browser } from 'playwright-core';

/** The median of `xs` (mean of the two middle values for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The `p`-th percentile of `xs` (nearest rank; `p` in 0–100). */
export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const rank = Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length)));
  return s[rank - 1]!;
}

/** Proportional set size in KiB of `pids` together (smaps_rollup; processes gone count 0). */
export function pssKiB(pids: readonly (number | string)[]): number {
  let kib = 0;
  for (const pid of pids) {
    try {
      const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      kib += Number(m?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  return kib;
}

/**
 * A JSON caller for a burrow server's API (`GET` without a body, `POST` with one); throws with
 * the status and body on anything but 2xx.
 */
export function serverApi(server: { url: string; apiKey: string }) {
  return async (path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const res = await fetch(server.url + path, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'x-api-key': server.apiKey, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
}

/** ms of each phase of one timed run, in order, and their sum. */
export interface Run {
  phases: number[];
  total: number;
}

/** Time `steps` one after the other. */
export async function timed(steps: (() => Promise<unknown>)[]): Promise<Run> {
  const phases: number[] = [];
  for (const step of steps) {
    const t = performance.now();
    await step();
    phases.push(performance.now() - t);
  }
  return { phases, total: phases.reduce((a, b) => a + b, 0) };
}

/** `name m ms` for the median of each phase of `runs`. */
export function phaseMedians(runs: readonly Run[], names: readonly string[]): string {
  return names
    .map((name, i) => `${name} ${median(runs.map((r) => r.phases[i]!)).toFixed(1)} ms`)
    .join(', ');
}

/**
 * A browser instance from `POST /v1/start` (with `body`) to `url` loaded on its first tab:
 * start, `cdp_url`, Playwright `connectOverCDP`, `goto`, each timed; then the client disconnects
 * (untimed). The instance is left running: its id is returned for the caller to stop.
 */
export async function startToPage(
  api: ReturnType<typeof serverApi>,
  body: Record<string, unknown>,
  url: string,
): Promise<{ run: Run; id: string }> {
  let id = '';
  let cdpUrl = '';
  let browser: Browser | undefined;
  const run = await timed([
    async () => (id = String((await api('/v1/start', body)).id)),
    async () => (cdpUrl = String((await api(`/v1/instance/${id}/browser/cdp_url`)).cdp_url)),
    async () => (browser = await chromium.connectOverCDP(cdpUrl)),
    () => browser!.contexts()[0]!.pages()[0]!.goto(url),
  ]);
  await browser!.close();
  return { run, id };
}
