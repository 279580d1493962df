/**
 * No isolation (`--insecure-no-isolation`): processes are plain children of the server with HOME
 * and TMPDIR in the instance directory. No namespaces, no uid of its own, no cgroup, no disk
 * quota, no seccomp, no network namespace (so no listen step), nothing started ahead. Convenience,
 * not isolation.
 */
import type { StdioOptions } from 'node:child_process';
import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Supervised } from '../../../internal/process.js';
import type { DiskPaths, ProcessSpace } from './space.js';

export class NoneSpace implements ProcessSpace {
  readonly level = 'none';
  readonly mode = 'none';
  readonly home: string;
  readonly tmp: string;
  readonly uid = undefined;
  readonly disk: Readonly<DiskPaths>;
  readonly cgroups = undefined;
  /** Pausing stops the processes one by one, best effort. */
  readonly pauseNeedsFreezer = false;
  readonly diskBytes = null;
  readonly init = 0;
  readonly anchored = false;
  readonly network = undefined;
  readonly startsAhead = false;
  readonly #diskRoot: string;

  /** `dir`: the instance directory, which holds the disk directory. */
  constructor(dir: string) {
    this.#diskRoot = join(dir, 'disk');
    this.disk = {
      home: join(this.#diskRoot, 'home'),
      tmp: join(this.#diskRoot, 'tmp'),
      shm: join(this.#diskRoot, 'shm'),
    };
    this.home = this.disk.home;
    this.tmp = this.disk.tmp;
  }

  /** Home readable by all, tmp and shm shared like the host's (sticky, 1777). */
  async makeDisk(): Promise<void> {
    await mkdir(this.#diskRoot, { recursive: true, mode: 0o700 });
    const dirs = [
      [this.disk.home, 0o755],
      [this.disk.tmp, 0o1777],
      [this.disk.shm, 0o1777],
    ] as const;
    await Promise.all(
      dirs.map(async ([path, mode]) => {
        await mkdir(path, { recursive: true });
        await chmod(path, mode);
      }),
    );
  }

  /** No anchor: nothing to start. */
  start(): Promise<void> {
    return Promise.resolve();
  }

  spawn(
    argv: readonly string[],
    stdio: StdioOptions,
    env: Record<string, string>,
    cwd: string,
  ): Supervised {
    const [cmd, ...args] = argv;
    return new Supervised(cmd!, args, { env, cwd, stdio });
  }

  /** The disk is the instance directory's, which the registry removes. */
  removeDisk(): Promise<void> {
    return Promise.resolve();
  }

  /** No ids were taken. */
  releaseIds(): void {}
}
