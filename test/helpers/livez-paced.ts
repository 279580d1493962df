/**
 * Another client's `/livez` latency as a client sending one every `everyMs` would see it, stalls
 * included: each probe is sent when due, whether the one before answered or not, and timed from
 * then. Timed from the send, one after another, a main thread stalled 3 s
 * delays one probe and the probes due during the stall are never made, so a p99 over the rest
 * does not see it; here every probe due during the stall waits for it, as that client would (the
 * server runs in the test's process, so the probes' own timer stalls with it and catches up).
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** Probes in flight at most. */
const CLIENTS = 4;

export interface Paced {
  latencies: number[];
  p99: number;
  max: number;
}

/**
 * Probes `/livez` of `serverUrl`, one due every `everyMs`, until `done` settles: `CLIENTS`
 * connections each take the next probe due, so a probe is sent when due unless all of them wait
 * for an answer (as many as a client of the server may open, http/limits.ts).
 */
export async function paced(
  serverUrl: string,
  done: Promise<unknown>,
  everyMs = 20,
): Promise<Paced> {
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => {});
  const latencies: number[] = [];
  const start = performance.now();
  let next = 0;
  const client = async () => {
    while (!finished) {
      const due = start + next++ * everyMs;
      const early = due - performance.now();
      if (early > 0) await sleep(early);
      const res = await fetch(`${serverUrl}/livez`);
      await res.arrayBuffer();
      latencies.push(performance.now() - due);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const sorted = [...latencies].sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
  return { latencies, p99, max: sorted.at(-1) ?? 0 };
}
