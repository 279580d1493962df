/**
 * A normal user (`burrow-ci`, created idempotently; the tests run as root) running
 * `node --import tsx <args>` from this checkout, with a home and a data directory of its own: how
 * a test runs burrow at the unprivileged level. The checkout is seen through a bind mount at a
 * path every user can traverse (a CI clone may sit under a directory only root may enter, such as
 * /root), in a mount namespace of the command's own.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../e2e/run.js';

export const NORMAL_USER = 'burrow-ci';

/**
 * The uid of the test user `name`, made if missing. Several test files may ask at once on a
 * fresh machine: a `useradd` that lost the race (the user exists, or /etc/passwd is locked by the
 * winner's) is fine once the user is there.
 */
export function ensureUser(name = NORMAL_USER): number {
  for (let attempt = 0; ; attempt++) {
    try {
      return Number(execFileSync('id', ['-u', name], { stdio: ['ignore', 'pipe', 'ignore'] }));
    } catch {
      // not there yet
    }
    try {
      execFileSync('useradd', ['--create-home', '--shell', '/bin/bash', name], { stdio: 'ignore' });
    } catch (err) {
      if (attempt >= 20) throw err;
      execFileSync('sleep', ['0.2']);
    }
  }
}

export interface NormalUser {
  uid: number;
  /** `node --import tsx <args>` as the user; its exit code and output, killed after `timeoutMs`. */
  run(
    args: string[],
    env: Record<string, string>,
    timeoutMs: number,
  ): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Removes the user's home and view of the checkout (the user stays, for other tests). */
  cleanup(): void;
}

export function normalUser(): NormalUser {
  const uid = ensureUser(NORMAL_USER);
  const view = mkdtempSync(join(tmpdir(), 'burrow-ci-src-'));
  chmodSync(view, 0o755);
  const home = mkdtempSync(join(tmpdir(), 'burrow-ci-'));
  chmodSync(home, 0o700);
  chownSync(home, uid, uid);
  const mountAndRun = 'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec "$@"';
  return {
    uid,
    run: (args, env, timeoutMs) =>
      new Promise((done) => {
        execFile(
          'unshare',
          [
            ...['--mount', '--propagation', 'private', '--', 'sh', '-c', mountAndRun, 'sh'],
            ...[root, view, 'runuser', '-u', NORMAL_USER, '--', 'env', `HOME=${home}`],
            `BURROW_DATA_DIR=${join(home, 'data')}`,
            ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
            ...[process.execPath, '--import', 'tsx', ...args],
          ],
          {
            cwd: root,
            env: { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' },
            timeout: Math.round(timeoutMs),
            killSignal: 'SIGKILL',
            maxBuffer: 16 << 20,
          },
          (err, stdout, stderr) =>
            done({ code: err ? ((err.code as number | undefined) ?? null) : 0, stdout, stderr }),
        );
      }),
    cleanup: () => {
      rmSync(home, { recursive: true, force: true });
      rmSync(view, { recursive: true, force: true });
    },
  };
}
