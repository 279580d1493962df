/**
 * What starting a short command costs the server's main thread, by how much memory the server
 * holds. `node --import tsx bench/spawn.ts [N]` (default 20) grows this process's RSS in steps
 * (touched buffers, as held frames and replies are) and at each runs `/bin/true` N times both
 * ways, one after another: forked from this process (`execFile`, what the server did) and through
 * the command helper (src/internal/aside.ts, what it does now). For each it prints the longest
 * stall of this process's event loop during the N runs (the median over three rounds) and
 * helper ÷ fork; the baseline is the fork at the smallest RSS.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { runAside } from '../src/internal/aside.js';
import { median } from './stats.js';

const n = Number(process.argv[2] ?? 20);
if (!Number.isInteger(n) || n < 1) throw new Error('usage: bench/spawn.ts [N ≥ 1]');
const run = promisify(execFile);

/** The longest gap between two turns of the event loop while `work` runs, in ms. */
async function longestStall(work: () => Promise<unknown>): Promise<number> {
  let longest = 0;
  let last = performance.now();
  let on = true;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (on) setImmediate(tick);
  };
  tick();
  await work();
  on = false;
  return longest;
}

const held: Buffer[] = [];
const hold = (mib: number) => {
  for (let i = 0; i < mib; i++) held.push(Buffer.alloc(1 << 20, 1));
};
await runAside('/bin/true', []); // the helper started, as a server's is after its first start
const rows: string[][] = [['RSS (MiB)', 'fork (ms)', 'helper (ms)', 'helper ÷ fork']];
let baseline = 0;
for (const step of [0, 250, 500, 500]) {
  hold(step);
  const forked: number[] = [];
  const aside: number[] = [];
  for (let round = 0; round < 3; round++) {
    forked.push(
      await longestStall(async () => {
        for (let i = 0; i < n; i++) await run('/bin/true', []);
      }),
    );
    aside.push(
      await longestStall(async () => {
        for (let i = 0; i < n; i++) await runAside('/bin/true', []);
      }),
    );
  }
  const [f, a] = [median(forked), median(aside)];
  baseline ||= f;
  rows.push([
    String(Math.round(process.memoryUsage().rss / 2 ** 20)),
    `${f.toFixed(1)} (${(f / baseline).toFixed(1)}× baseline)`,
    a.toFixed(1),
    (a / f).toFixed(2),
  ]);
}
for (const r of rows) console.log(r.map((c, i) => c.padEnd(i ? 26 : 10)).join(''));
process.exit(0);
