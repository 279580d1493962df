/**
 * Stopping one Chromium must not touch another instance's processes
 * (src/server/chromium/chromium.ts, `members`). In a sandbox every instance's Chromium names the
 * same /home/user path, and the kernel hands a freed namespace's number to the next namespace it
 * makes, so a process of another instance can carry both the path and a namespace number this
 * Chromium had. Telling strays apart by those two SIGKILLed the Chromium another instance was
 * starting (a few times per thousand starts under load). Here the coincidence is made on purpose:
 * the decoy names the path and shares the browser's mount namespace, but is not one of its
 * sandbox's members, and must survive the browser's stop.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { alive, descendants, Supervised } from '../../../src/internal/process.js';
import { launchChromium } from '../../../src/server/chromium/chromium.js';

const CHROMIUM = process.env.BURROW_CHROMIUM ?? '/usr/lib/chromium/chromium';
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

describe('a stopped Chromium kills only its own processes', () => {
  it('spares a process of another instance that names the same path in the same namespace', async () => {
    expect(process.getuid?.(), 'entering a mount namespace needs root').toBe(0);
    const root = await mkdtemp(join(tmpdir(), 'burrow-strays-'));
    cleanup.push(() => rm(root, { recursive: true, force: true }));
    const dir = join(root, 'host-view');
    const processDir = join(root, 'shared-path'); // what every instance's Chromium would name

    // the other instance's process: its own mount namespace, the shared path on its command line
    const decoy = spawn(
      'unshare',
      ['--mount', '--', 'sh', '-c', 'sleep 600; :', join(processDir, 'profile', 'decoy')],
      { stdio: 'ignore', detached: true },
    );
    cleanup.push(async () => {
      try {
        process.kill(-decoy.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    });
    const decoyPid = await waitFor(() => descendants(decoy.pid!).find((p) => p > 0) ?? decoy.pid!);
    expect(alive(decoyPid)).toBe(true);

    // this Chromium runs in the decoy's mount namespace: the number a reused namespace would share
    const ours = new Set<number>();
    const chromium = await launchChromium({
      executablePath: CHROMIUM,
      dir,
      processDir,
      windowSize: [800, 600],
      args: ['--no-sandbox'],
      spawn: (argv, o) => {
        const proc = new Supervised(
          'nsenter',
          [`--mount=/proc/${decoyPid}/ns/mnt`, '--', ...argv],
          { env: o.env, stdio: o.stdio },
        );
        ours.add(proc.pid);
        return proc;
      },
      // the sandbox's members: this browser's own processes only
      members: () => [...ours].flatMap((pid) => [pid, ...descendants(pid)]),
    });
    cleanup.push(() => chromium.kill());
    const browserPids = descendants(chromium.process.pid);
    expect(browserPids.length).toBeGreaterThan(0);

    await chromium.kill();
    expect(browserPids.filter(alive)).toEqual([]);
    expect(alive(decoyPid), 'the other instance’s process was killed').toBe(true);
  });
});

async function waitFor<T>(probe: () => T, timeoutMs = 5000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value || Date.now() > end) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
}
