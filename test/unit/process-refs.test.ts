/**
 * Signals to processes seen earlier (src/internal/process.ts `ProcessRef`): once a process is
 * reaped its number can name another process within milliseconds on a busy machine, and a
 * SIGKILL meant for the first then kills the second (this is how stopping one instance killed
 * another's starting Chromium). The reuse itself cannot be produced on demand, so the last case
 * stands it in: a live process and a reference with the same number but another start time.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { processRef, signalProcess, stillRunning } from '../../src/internal/process.js';

const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function sleeper() {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(child);
  return child;
}

describe('signals to processes seen earlier', () => {
  it('reach the process while it runs', async () => {
    const child = sleeper();
    const ref = processRef(child.pid!)!;
    expect(stillRunning(ref)).toBe(true);
    signalProcess(ref, 'SIGTERM');
    const [, signal] = (await once(child, 'exit')) as [number | null, string | null];
    expect(signal).toBe('SIGTERM');
    expect(stillRunning(ref)).toBe(false);
    expect(processRef(child.pid!)).toBeUndefined();
  });

  it('do not reach a process that got the number later', async () => {
    const child = sleeper();
    const now = processRef(child.pid!)!;
    const earlier = { pid: now.pid, start: String(Number(now.start) - 1) };
    expect(stillRunning(earlier)).toBe(false);
    signalProcess(earlier, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 100));
    expect(child.exitCode).toBeNull();
    expect(child.signalCode).toBeNull();
    expect(stillRunning(now)).toBe(true);
  });
});
