/**
 * /etc/subuid and /etc/subgid belong to the host, and two test files change them for a while
 * (sandbox/unprivileged: the test user with and without a range, another user's range for
 * doctor; sandbox/rootfs-writes: a server with a range). vitest runs files in parallel workers,
 * so each holds this lock from before it first reads them until after it put them back: neither
 * sees the other's lines, and neither puts back a copy that holds the other's.
 *
 * The lock is a directory (mkdir is atomic) naming its holder's pid; a holder that died without
 * letting go (a killed worker) is noticed and its lock taken over.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

const LOCK = '/tmp/burrow-test-host-id-files.lock';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Waits for the lock (at most `waitMs`), takes it, and returns what lets it go. */
export async function lockHostIdFiles(waitMs = 15 * 60_000): Promise<() => void> {
  const end = performance.now() + waitMs;
  for (;;) {
    try {
      mkdirSync(LOCK);
      writeFileSync(`${LOCK}/pid`, String(process.pid));
      return () => rmSync(LOCK, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder = NaN;
    try {
      holder = Number(readFileSync(`${LOCK}/pid`, 'utf8'));
    } catch {
      // made but not yet named: its maker is about to write the pid
    }
    if (Number.isInteger(holder) && holder > 0 && !alive(holder)) {
      rmSync(LOCK, { recursive: true, force: true });
      continue;
    }
    if (performance.now() > end) {
      throw new Error(`${LOCK} held by pid ${holder} for ${waitMs} ms`);
    }
    await sleep(250);
  }
}
