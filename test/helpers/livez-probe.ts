/**
 * What another client of the server observes during an attack: the latency of `GET /livez`,
 * asked one after another every few milliseconds, and the server's resident memory (the server
 * runs in the test's process: `process.memoryUsage().rss`) sampled alongside.
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface Observed {
  /** Latencies of every `/livez`, in milliseconds. */
  latencies: number[];
  p99: number;
  max: number;
  /** Highest RSS seen, in bytes. */
  peakRss: number;
}

/** Probes `/livez` of `serverUrl` until `done` settles (or `limitMs` passes). */
export async function observe(
  serverUrl: string,
  done: Promise<unknown>,
  limitMs = 120_000,
): Promise<Observed> {
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => {});
  const latencies: number[] = [];
  let peakRss = process.memoryUsage().rss;
  const until = performance.now() + limitMs;
  while (!finished && performance.now() < until) {
    const t0 = performance.now();
    const res = await fetch(`${serverUrl}/livez`);
    await res.arrayBuffer();
    latencies.push(performance.now() - t0);
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    await sleep(10);
  }
  return { latencies, ...summary(latencies), peakRss };
}

/** The same, for a fixed time with nothing else going on: the reference of this run. */
export const reference = (serverUrl: string, ms = 2000) => observe(serverUrl, sleep(ms));

function summary(latencies: number[]) {
  const sorted = [...latencies].sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
  return { p99, max: sorted.at(-1) ?? 0 };
}
