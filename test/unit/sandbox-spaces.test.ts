/**
 * The process space of each privilege level (src/server/sandbox/space/): the chain every process
 * of an instance is started through, the anchor's and the listen step's, rendered for a fixed
 * plan and fixed pids without starting anything. Each chain is written out in full: a step added,
 * dropped or moved (the uid drop, the parent-death signal, `--cap-drop ALL`, the seccomp filter,
 * the environment through a pipe) fails here. And the choice of the space from what the host
 * holds, made once per sandbox.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SandboxHost } from '../../src/server/sandbox/host.js';
import type { SpawnPlan } from '../../src/server/sandbox/plan.js';
import type { ChainFds } from '../../src/server/sandbox/space/chain.js';
import { chooseSpace, type SpaceContext } from '../../src/server/sandbox/space/index.js';
import type { Anchor } from '../../src/server/sandbox/space/isolated.js';
import { NoneSpace } from '../../src/server/sandbox/space/none.js';
import { RootSpace } from '../../src/server/sandbox/space/root.js';
import { SubidsSpace } from '../../src/server/sandbox/space/subids.js';
import { UsernsSpace } from '../../src/server/sandbox/space/userns.js';
import { SANDBOX_PATH } from '../../src/server/sandbox/rootfs.js';
import { STAGE } from '../../src/server/sandbox/subids.js';

const work = mkdtempSync(join(tmpdir(), 'burrow-spaces-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const PLAN: SpawnPlan = {
  masked: '',
  tools: {
    perl: '/t/perl',
    nsenter: '/t/nsenter',
    setpriv: '/t/setpriv',
    bwrap: '/t/bwrap',
    unshare: '/t/unshare',
    sh: '/t/sh',
  },
  instance: [
    { kind: 'ro-bind', src: '/usr', dest: '/usr' },
    { kind: 'dir-fd', dir: 'etc', dest: '/etc', readOnly: true },
    { kind: 'dir-fd', dir: 'home', dest: '/home/user', readOnly: false },
    { kind: 'dir-fd', dir: 'tmp', dest: '/tmp', readOnly: false },
    { kind: 'dir-fd', dir: 'shm', dest: '/dev/shm', readOnly: false },
  ],
  init: [{ kind: 'ro-bind', src: '/usr', dest: '/usr' }],
};
const SECCOMP = Buffer.from('the filter');
const AT: Anchor = { init: 4242, anchor: 4200 };
const UID = 2_100_000_123;
const NAME = 'inst_1';

/** A host as far as a space reads it. */
function fakeHost(over: Partial<Record<string, unknown>> = {}): SandboxHost {
  return {
    plan: PLAN,
    seccomp: SECCOMP,
    etcDir: '/srv/etc',
    cgroups: undefined,
    isolated: true,
    limits: { diskBytes: 0 },
    support: { level: 'root', ownUid: true, quotaKind: undefined },
    ...over,
  } as unknown as SandboxHost;
}

const ctx = (host: SandboxHost): SpaceContext => ({
  host,
  name: NAME,
  cgroupFiles: () => [],
  track() {},
  anchorExited() {},
});

/** Descriptors as a chain's builder passes them: numbered from 3 (after stdio), recorded. */
function recordFds(): ChainFds & {
  opened: [number, string, number?][];
  pipes: [number, string][];
} {
  let next = 3;
  const opened: [number, string, number?][] = [];
  const pipes: [number, string][] = [];
  return {
    opened,
    pipes,
    open(path, flags) {
      opened.push(flags === undefined ? [next, path] : [next, path, flags]);
      return next++;
    },
    pipe(data) {
      pipes.push([next, data.toString()]);
      return next++;
    },
  };
}

/** bubblewrap's part of every process's chain: fds 3 and 4 the instance's user and pid namespaces. */
const BWRAP_SPAWN = [
  '/t/bwrap',
  '--userns',
  '3',
  '--pidns',
  '4',
  '--ro-bind',
  '/usr',
  '/usr',
  '--ro-bind-fd',
  '5',
  '/etc',
  '--bind-fd',
  '6',
  '/home/user',
  '--bind-fd',
  '7',
  '/tmp',
  '--bind-fd',
  '8',
  '/dev/shm',
  '--args',
  '9',
  '--setenv',
  'BURROW_INSTANCE',
  NAME,
  '--cap-drop',
  'ALL',
  '--seccomp',
  '10',
  '--chdir',
  '/home/user/work',
  '--',
  '/t/sh',
  '-c',
  'exec 3<&- 4<&- "$@"',
  'burrow-exec',
  'env',
];

/** bubblewrap's part of the anchor's chain: pid 1 in namespaces it makes. */
const BWRAP_ANCHOR = [
  '/t/bwrap',
  '--unshare-user',
  '--uid',
  '1000',
  '--gid',
  '1000',
  '--unshare-pid',
  '--as-pid-1',
  '--unshare-net',
  '--unshare-ipc',
  '--unshare-uts',
  '--hostname',
  'burrow',
  '--unshare-cgroup',
  '--die-with-parent',
  '--ro-bind',
  '/usr',
  '/usr',
  '--args',
  '3',
  '--setenv',
  'BURROW_INSTANCE',
  NAME,
  '--cap-drop',
  'ALL',
  '--seccomp',
  '4',
  '--chdir',
  '/',
  '--',
  '/bin/sh',
  '-c',
  'trap "" TERM INT HUP; while :; do sleep infinity & wait; done',
  `burrow-init-${NAME}`,
];

const INIT_NS = [
  `--net=/proc/${AT.init}/ns/net`,
  `--ipc=/proc/${AT.init}/ns/ipc`,
  `--uts=/proc/${AT.init}/ns/uts`,
  `--cgroup=/proc/${AT.init}/ns/cgroup`,
];
const ENTER_OUTER = [
  '/t/nsenter',
  '--preserve-credentials',
  `--user=/proc/${AT.anchor}/ns/user`,
  `--mount=/proc/${AT.anchor}/ns/mnt`,
  ...INIT_NS,
  '--',
];
const DROP = [`--reuid=${UID}`, `--regid=${UID}`, '--clear-groups'];
const TO_INNER = ['--reuid=1000', '--regid=1000', '--clear-groups'];
const listenStep = (ns: readonly number[]) => ['/t/perl', '-e', 'LISTEN', ...ns.map(String)];

/** A spawn's chain and what it passed: `env` with FOO=bar in /home/user/work. */
function spawnOf(space: RootSpace | UsernsSpace | SubidsSpace) {
  const fds = recordFds();
  const argv = space.spawnArgv(fds, AT, ['env'], { FOO: 'bar' }, '/home/user/work');
  return { argv, fds };
}

/** What every spawn passes: namespaces, /etc, the three directories, env and filter pipes. */
function expectPassed(fds: ReturnType<typeof recordFds>, dirs: [number, string, number?][]) {
  expect(fds.opened).toEqual([
    [3, `/proc/${AT.init}/ns/user`],
    [4, `/proc/${AT.init}/ns/pid`],
    ...dirs,
  ]);
  expect(fds.pipes).toEqual([
    [9, '--clearenv\0--setenv\0FOO\0bar\0'],
    [10, 'the filter'],
  ]);
}

describe('the root level (root.ts)', () => {
  const space = new RootSpace(ctx(fakeHost()), join(work, 'root'), UID);
  const disk = join(work, 'root', 'disk');
  const dirs: [number, string][] = [
    [5, '/srv/etc'],
    [6, join(disk, 'home')],
    [7, join(disk, 'tmp')],
    [8, join(disk, 'shm')],
  ];

  it('joins as root with nsenter, drops to the instance uid, then bubblewrap confines', () => {
    const { argv, fds } = spawnOf(space);
    expect(argv).toEqual([
      '/t/nsenter',
      ...INIT_NS,
      '--',
      '/t/setpriv',
      ...DROP,
      '--pdeathsig=SIGKILL',
      '--',
      ...BWRAP_SPAWN,
    ]);
    expectPassed(fds, dirs);
  });

  it("starts the anchor as the instance's uid", () => {
    const fds = recordFds();
    expect(space.anchorArgv(fds)).toEqual([
      '/t/setpriv',
      ...DROP,
      '--pdeathsig=SIGKILL',
      '--',
      ...BWRAP_ANCHOR,
    ]);
    expect(fds.opened).toEqual([]);
    expect(fds.pipes).toEqual([
      [3, `--clearenv\0--setenv\0PATH\0${SANDBOX_PATH}\0`],
      [4, 'the filter'],
    ]);
  });

  it('listens from root, joining the network namespace alone', () => {
    const fds = recordFds();
    expect(space.listenArgv(fds, AT, listenStep)).toEqual(['/t/perl', '-e', 'LISTEN', '3']);
    expect(fds.opened).toEqual([[3, `/proc/${AT.init}/ns/net`]]);
  });
});

describe('the user-namespace level (userns.ts)', () => {
  it('a container root with CAP_SETUID: drops to the uid, enters the outer namespaces', () => {
    const space = new UsernsSpace(ctx(fakeHost()), join(work, 'userns'), UID);
    const { argv } = spawnOf(space);
    expect(argv).toEqual([
      '/t/setpriv',
      ...DROP,
      '--',
      ...ENTER_OUTER,
      '/t/setpriv',
      '--pdeathsig=SIGKILL',
      '--',
      ...BWRAP_SPAWN,
    ]);
    const fds = recordFds();
    expect(space.anchorArgv(fds).slice(0, 14)).toEqual([
      '/t/setpriv',
      ...DROP,
      '--pdeathsig=SIGKILL',
      '--',
      '/t/unshare',
      '--user',
      '--map-root-user',
      '--mount',
      '--propagation',
      'private',
      '--',
      '/t/bwrap',
    ]);
    const listen = recordFds();
    expect(space.listenArgv(listen, AT, listenStep)).toEqual([
      '/t/setpriv',
      ...DROP,
      '--',
      '/t/perl',
      '-e',
      'LISTEN',
      '3',
      '4',
    ]);
    expect(listen.opened).toEqual([
      [3, `/proc/${AT.anchor}/ns/user`],
      [4, `/proc/${AT.init}/ns/net`],
    ]);
  });

  it("a normal user without a range: the server's uid, the disk a tmpfs the anchor mounts", async () => {
    const host = fakeHost({
      limits: { diskBytes: 1 << 30 },
      support: { level: 'unprivileged', ownUid: false, quotaKind: 'tmpfs' },
    });
    const space = new UsernsSpace(ctx(host), join(work, 'userns-tmpfs'), undefined);
    await space.makeDisk();
    expect(space.diskBytes).toBe(1 << 30);
    const { argv } = spawnOf(space);
    expect(argv).toEqual([
      ...ENTER_OUTER,
      '/t/setpriv',
      '--pdeathsig=SIGKILL',
      '--',
      ...BWRAP_SPAWN,
    ]);
    expect(space.anchorArgv(recordFds())).toEqual([
      '/t/setpriv',
      '--pdeathsig=SIGKILL',
      '--',
      '/t/unshare',
      '--user',
      '--map-root-user',
      '--mount',
      '--propagation',
      'private',
      '--',
      '/t/sh',
      '-c',
      'set -e; mount -t tmpfs -o "size=$1,mode=0711,nosuid,nodev" burrow-disk "$2"; ' +
        'cd "$2"; mkdir -m 0700 home tmp shm; shift 2; exec "$@"',
      'burrow-disk',
      String(1 << 30),
      join(work, 'userns-tmpfs', 'disk'),
      ...BWRAP_ANCHOR,
    ]);
    expect(space.listenArgv(recordFds(), AT, listenStep)).toEqual([
      '/t/perl',
      '-e',
      'LISTEN',
      '3',
      '4',
    ]);
  });
});

describe('the subordinate-id level (subids.ts)', () => {
  /** The level, with what it learns once its anchor runs. */
  class Probe extends SubidsSpace {
    anchorRuns(at: Anchor): void {
      this.afterAnchor(at);
    }
  }
  const host = fakeHost({ support: { level: 'unprivileged', ownUid: false, quotaKind: 'tmpfs' } });
  const ids = { uid: 2_000_017, gid: 2_000_017 };

  it("enters the outer namespaces, drops to 1000 there; binds the disk, the server's view aside", async () => {
    const space = new Probe(ctx(host), join(work, 'subids'), ids);
    await space.makeDisk();
    expect(space.uid).toBeUndefined();
    expect(space.diskBytes).toBeNull();
    space.anchorRuns(AT);
    const root = `/proc/${AT.anchor}/root${STAGE}`;
    expect(space.disk).toEqual({
      home: `${root}/view/home`,
      tmp: `${root}/view/tmp`,
      shm: `${root}/view/shm`,
    });
    const { argv, fds } = spawnOf(space);
    expect(argv).toEqual([
      ...ENTER_OUTER,
      '/t/setpriv',
      ...TO_INNER,
      '--pdeathsig=SIGKILL',
      '--',
      ...BWRAP_SPAWN,
    ]);
    // by path descriptors: the server may not read the disk's directories, only hand them on
    const O_PATH_DIR = 0o10000000 | 0o200000;
    expectPassed(fds, [
      [5, `${root}/etc`],
      [6, `${root}/disk/home`, O_PATH_DIR],
      [7, `${root}/disk/tmp`, O_PATH_DIR],
      [8, `${root}/disk/shm`, O_PATH_DIR],
    ]);
    const anchor = space.anchorArgv(recordFds());
    expect(anchor.slice(0, 8)).toEqual([
      '/t/setpriv',
      '--pdeathsig=SIGKILL',
      '--',
      '/t/unshare',
      '--user',
      '--map-root-user',
      `--map-users=${ids.uid},1000,1`,
      `--map-groups=${ids.gid},1000,1`,
    ]);
    expect(anchor.slice(-BWRAP_ANCHOR.length - 5)).toEqual([
      '/t/setpriv',
      ...TO_INNER,
      '--',
      ...BWRAP_ANCHOR,
    ]);
    const listen = recordFds();
    expect(space.listenArgv(listen, AT, listenStep)).toEqual(['/t/perl', '-e', 'LISTEN', '3', '4']);
    expect(listen.opened).toEqual([
      [3, `/proc/${AT.anchor}/ns/user`],
      [4, `/proc/${AT.init}/ns/net`],
    ]);
  });
});

describe('choosing the space (index.ts)', () => {
  /** A host for `chooseSpace`, counting the ids it hands out. */
  function host(
    support: Record<string, unknown>,
    opts: { isolated?: boolean; subids?: boolean } = {},
  ) {
    const taken: string[] = [];
    const h = fakeHost({
      isolated: opts.isolated ?? true,
      support,
      allocateUid: () => (taken.push('uid'), UID),
      allocateSubordinate: () => (
        taken.push('subids'),
        opts.subids ? { uid: 7, gid: 7 } : undefined
      ),
      instanceDir: (name: string) => Promise.resolve(join(work, 'dirs', name)),
    });
    return { h, taken };
  }
  const open = async (h: SandboxHost) => (await chooseSpace(h, NAME, join(work, 'own')))(ctx(h));

  it('none without isolation: no ids, the instance directory itself', async () => {
    const { h, taken } = host({ level: 'root', ownUid: true }, { isolated: false });
    const space = await open(h);
    expect(space).toBeInstanceOf(NoneSpace);
    expect([space.mode, space.home, space.network, space.startsAhead]).toEqual([
      'none',
      join(work, 'own', 'disk', 'home'),
      undefined,
      false,
    ]);
    expect(taken).toEqual([]);
  });

  it('root at the root level, with a host uid of its own', async () => {
    const { h, taken } = host({ level: 'root', ownUid: true }, { subids: true });
    const space = await open(h);
    expect(space).toBeInstanceOf(RootSpace);
    expect([space.mode, space.uid, space.home, space.tmp]).toEqual([
      'isolated',
      UID,
      '/home/user',
      '/tmp',
    ]);
    expect(taken).toEqual(['uid']);
  });

  it('userns for a container root with CAP_SETUID, with a host uid of its own', async () => {
    const { h, taken } = host({ level: 'container-root', ownUid: true }, { subids: true });
    const space = await open(h);
    expect([space.constructor, space.uid]).toEqual([UsernsSpace, UID]);
    expect(taken).toEqual(['uid']);
  });

  it("subids for a normal user with a range; userns, as the server's uid, without", async () => {
    const ranged = host({ level: 'unprivileged', ownUid: false }, { subids: true });
    const space = await open(ranged.h);
    expect([space.constructor, space.uid]).toEqual([SubidsSpace, undefined]);
    expect(ranged.taken).toEqual(['subids']);
    const plain = host({ level: 'unprivileged', ownUid: false }, { subids: false });
    const other = await open(plain.h);
    expect([other.constructor, other.uid]).toEqual([UsernsSpace, undefined]);
    expect(plain.taken).toEqual(['subids']);
  });
});
