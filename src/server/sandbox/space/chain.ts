/**
 * The root side of a spawn chain, the same at every isolated level: how a chain is started from
 * the server and the steps the levels compose theirs from. Every chain has the same shape at its
 * root end, whatever the instance asked for: a fixed environment (the instance's variables travel
 * to bubblewrap in a pipe and reach only the command, so nothing it sets, `LD_PRELOAD` say, is
 * seen by a process running as root), and a first step (`CHAIN_START`) that joins the instance's
 * cgroup and closes every descriptor but the ones listed in its stdio and those the chain passes
 * on purpose (descriptors the server inherited from whoever started it would otherwise reach
 * every instance process).
 */
import type { StdioOptions } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { Supervised } from '../../../internal/process.js';

/**
 * The first step of every root-side chain (perl: Essential in Debian, starts in ~2 ms): write its
 * pid into each cgroup file named, close every descriptor from the given number up
 * (`close_range`, 436 on every Linux architecture), then execute the rest of its arguments.
 * Arguments: N, N cgroup.procs paths, the first descriptor to close, the command.
 */
export const CHAIN_START =
  'my $n = shift; for (1 .. $n) { my $f = shift; open(my $h, ">", $f) or exit 125; ' +
  'print $h "$$\\n"; close($h) or exit 125 } my $keep = 0 + shift; ' +
  'syscall(436, $keep, 0xffffffff, 0) == 0 or exit 126; exec { $ARGV[0] } @ARGV; exit 127';

/** The whole environment of the root side of a chain, whatever the instance's is. */
export const ROOT_SIDE_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } as const;

/**
 * How a chain's builder passes descriptors to it on purpose: each call gives the number the child
 * sees the descriptor as (after its stdio, in the order of the calls).
 */
export interface ChainFds {
  /** Open `path` (read-only, or with `flags`) for the chain; closed here once the child has it. */
  open(path: string, flags?: number): number;
  /** A pipe the chain reads `data` from, then its end. */
  pipe(data: Buffer): number;
}

/**
 * Start a chain of root-side wrappers: `CHAIN_START` with `cgroupFiles`, then what `build` names
 * (it may pass descriptors with the `ChainFds` it is given).
 */
export function startChain(
  perl: string,
  cgroupFiles: readonly string[],
  stdio: StdioOptions,
  build: (fds: ChainFds) => string[],
): Supervised {
  const list: unknown[] = Array.isArray(stdio) ? [...(stdio as unknown[])] : [stdio, stdio, stdio];
  const opened: number[] = [];
  const pipes: [number, Buffer][] = [];
  const fds: ChainFds = {
    open(path, flags) {
      const fd = flags === undefined ? openSync(path, 'r') : openSync(path, flags);
      opened.push(fd);
      list.push(fd);
      return list.length - 1;
    },
    pipe(data) {
      pipes.push([list.length, data]);
      list.push('pipe');
      return list.length - 1;
    },
  };
  try {
    const chain = build(fds);
    const proc = new Supervised(
      perl,
      [
        '-e',
        CHAIN_START,
        String(cgroupFiles.length),
        ...cgroupFiles,
        String(list.length),
        ...chain,
      ],
      { env: ROOT_SIDE_ENV, stdio: list as StdioOptions },
    );
    for (const [fd, data] of pipes) {
      const pipe = proc.child.stdio[fd] as Writable | null;
      pipe?.on('error', () => {});
      pipe?.end(data);
    }
    return proc;
  } finally {
    for (const fd of opened) closeSync(fd);
  }
}

/**
 * setpriv to the host uid `uid` (and the same gid, no supplementary groups); the parent-death
 * signal after the uid change, which clears it (`deathSignal` false where a later step sets it).
 */
export function dropToUid(setpriv: string, uid: number, deathSignal = true): string[] {
  return [
    setpriv,
    `--reuid=${uid}`,
    `--regid=${uid}`,
    '--clear-groups',
    ...(deathSignal ? ['--pdeathsig=SIGKILL'] : []),
    '--',
  ];
}

/** setpriv setting only the parent-death signal (a step that keeps its ids). */
export function deathSignal(setpriv: string): string[] {
  return [setpriv, '--pdeathsig=SIGKILL', '--'];
}

/**
 * bubblewrap closes the descriptors it reads (`--args`, `--seccomp`, `--bind-fd`) but not the two
 * namespace descriptors of `--userns/--pidns`, which the command would inherit open. A shell
 * (dash: ~1 ms) closes them and executes the command in its place, same pid, same argv.
 */
export function closeNamespaceFds(fds: readonly number[], sh: string): string[] {
  return [sh, '-c', `exec ${fds.map((fd) => `${fd}<&-`).join(' ')} "$@"`, 'burrow-exec'];
}
