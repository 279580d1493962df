/**
 * A host uid of its own for every instance of a server run by a normal user: one uid and one gid
 * out of the user's subordinate ranges (`/etc/subuid`, `/etc/subgid`), mapped with Debian's
 * uidmap (`newuidmap`/`newgidmap`, setuid root or with file capabilities, which check the ranges
 * against those files).
 *
 * How an instance uses its pair (space/subids.ts, the user-namespace chain): `unshare` makes the outer
 * user namespace with the server's uid as its root and the instance's host uid as `user` (1000)
 * (`--map-users`: unshare runs newuidmap for it); there the anchor mounts the instance's disk (a
 * tmpfs), hands home, tmp and shm to 1000, and drops to 1000 before its bubblewrap makes the
 * instance's own user namespace (1000 inside → 1000 of the outer one → the host uid). Every
 * process of the instance then runs as that host uid: seen from the host, it owns nothing but
 * its own processes and disk, so a process that left every namespace could still not signal,
 * trace or read another instance or the server.
 *
 * The server is not that uid, and cannot read what the instance keeps to itself (a profile's
 * 0600 files, a download). So the anchor also mounts a second view of the same disk beside it,
 * idmapped (`mount_setattr(MOUNT_ATTR_IDMAP)`, tmpfs since Linux 6.3): there the instance's uid
 * reads as the server's. The server reads and writes the instance's files through that view as
 * their owner (what it creates lands on the disk as the instance's), and binds the plain disk
 * into the instance. The view lives in the outer mount namespace only: nothing of the instance
 * reaches it.
 */
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { freeRange, rangeConflicts, spanOf, type IdFiles, type IdRange } from './subid-ranges.js';

/** The uid (and gid) an instance's user has inside its namespaces: `user` in its /etc/passwd. */
const INNER_ID = 1000;

export type { IdRange } from './subid-ranges.js';

/** The server user's subordinate ranges, as far as it has them. */
export interface SubordinateRanges {
  uid: IdRange | undefined;
  gid: IdRange | undefined;
}

/** A host uid and gid handed to one instance. */
export interface SubordinateIds {
  uid: number;
  gid: number;
}

/** The first range of the server's user (by name or uid) in `file`. */
function rangeIn(file: string): IdRange | undefined {
  let user = '';
  try {
    user = userInfo().username;
  } catch {
    /* no passwd entry */
  }
  const uid = String(process.getuid?.());
  try {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const [who, start, count] = line.trim().split(':');
      if (who !== user && who !== uid) continue;
      const range = { start: Number(start), count: Number(count) };
      if (Number.isSafeInteger(range.start) && range.count > 0) return range;
    }
  } catch {
    /* none */
  }
  return undefined;
}

export function subordinateRanges(): SubordinateRanges {
  return { uid: rangeIn('/etc/subuid'), gid: rangeIn('/etc/subgid') };
}

/** The host's id files as they are now ('' for one that cannot be read). */
export function idFiles(): IdFiles {
  const read = (file: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  };
  return {
    subuid: read('/etc/subuid'),
    subgid: read('/etc/subgid'),
    passwd: read('/etc/passwd'),
    group: read('/etc/group'),
  };
}

/**
 * The command giving `user` a range no one else holds (freeRange), to run as root; `drop`, the
 * user's present range, is taken away in the same command.
 */
function addRangeFix(user: string, files: IdFiles, drop?: { uid: IdRange; gid: IdRange }): string {
  const free = freeRange(files);
  if (!free) {
    return `give ${user} a range in /etc/subuid and /etc/subgid that no other user's range, account or group touches (none of 65536 ids is left)`;
  }
  const del = drop ? `--del-subuids ${spanOf(drop.uid)} --del-subgids ${spanOf(drop.gid)} ` : '';
  return `usermod ${del}--add-subuids ${spanOf(free)} --add-subgids ${spanOf(free)} ${user} (as root; a range no other user's range, account or group touches), then restart the server`;
}

/** `start:count`, as /etc/subuid writes it. */
export const showRange = (r: IdRange): string => `${r.start}:${r.count}`;

/**
 * The Perl program that makes the server's view of an instance's disk (run as root of the outer
 * user namespace, in its mount namespace, before anything of the instance runs). Arguments: the
 * disk's mount point, the view's (an empty directory), the instance's uid inside, and the number
 * of unshare(2) on this architecture. A child opens a user namespace that the parent maps (that
 * uid → the outer namespace's root, i.e. the server), and the parent clones the disk's mount,
 * idmaps the clone with that namespace and attaches it at the view: files of the instance's uid
 * read there as the server's, and what the server creates there is the instance's on the disk.
 * Syscall numbers: open_tree 428, move_mount 429, mount_setattr 442 (the same on every Linux
 * architecture).
 */
export const IDMAP_VIEW =
  'my ($disk, $view, $id, $unshare) = @ARGV; pipe(my $r, my $w) or die "pipe: $!"; ' +
  'pipe(my $r2, my $w2) or die "pipe: $!"; my $pid = fork() // die "fork: $!"; ' +
  'if ($pid == 0) { close $r; close $w2; syscall($unshare, 0x10000000) == 0 or exit 1; ' +
  'syswrite($w, "u"); sysread($r2, my $x, 1); exit 0 } close $w; close $r2; ' +
  'sysread($r, my $b, 1) == 1 or die "could not open a user namespace"; ' +
  'sub put { open(my $h, ">", $_[0]) or die "$_[0]: $!"; print $h $_[1]; close $h or die "$_[0]: $!" } ' +
  'put("/proc/$pid/uid_map", "$id 0 1\\n"); put("/proc/$pid/setgroups", "deny"); ' +
  'put("/proc/$pid/gid_map", "$id 0 1\\n"); open(my $ns, "<", "/proc/$pid/ns/user") or die "userns: $!"; ' +
  'close $w2; waitpid($pid, 0); my $e = ""; ' +
  'my $fd = syscall(428, -100, $disk, 0x8000 | 1 | 0x80000); $fd >= 0 or die "open_tree: $!"; ' +
  'my $attr = pack("QQQQ", 0x100000, 0, 0, fileno($ns)); ' +
  'syscall(442, $fd, $e, 0x1000, $attr, length($attr)) == 0 or die "mount_setattr (idmap): $!"; ' +
  'syscall(429, $fd, $e, -100, $view, 4) == 0 or die "move_mount: $!"';

/** unshare(2)'s number for `IDMAP_VIEW`. */
export const UNSHARE_SYSCALL = process.arch === 'arm64' ? 97 : 272;

/**
 * Where the anchor puts the instance's disk (`disk`), the server's view of it (`view`) and the
 * instance's /etc (`etc`, bound from the server's) in the outer mount namespace: a small tmpfs of
 * its own over /tmp there (the host's /tmp is not part of any instance). Every process of the
 * instance drops to its uid before bubblewrap resolves the directories it binds, and the server's
 * own paths (its data dir under a home only it may enter, say) would stop that uid on the way.
 */
export const STAGE = '/tmp';

/**
 * The anchor's steps from the host into the outer user namespace with the instance's ids mapped,
 * the stage mounted with its disk, view and /etc, down to the instance's uid (1000 there); the
 * anchor's bubblewrap follows. `tmpfsBytes` 0: a disk without a size of its own (the kernel's
 * default, half the memory), as the view needs a file system of the namespace's.
 */
export function anchorSteps(
  tools: { unshare: string; sh: string; perl: string; setpriv: string },
  ids: SubordinateIds,
  etcDir: string,
  tmpfsBytes: number,
): string[] {
  const size = tmpfsBytes > 0 ? `size=${tmpfsBytes},` : '';
  return [
    tools.unshare,
    '--user',
    '--map-root-user',
    // outer,inner,count: util-linux 2.38's form, which 2.39 and later still read (their own is
    // inner:outer:count)
    `--map-users=${ids.uid},${INNER_ID},1`,
    `--map-groups=${ids.gid},${INNER_ID},1`,
    '--mount',
    '--propagation',
    'private',
    '--',
    tools.sh,
    '-c',
    // (/etc is opened first, as fd 9, above the anchor's own: the stage may cover the server's path
    // to it; bound recursively, as a plain bind of a directory with mounts on it (a container's
    // /etc/hosts, /etc/resolv.conf) is refused in a user namespace, EINVAL)
    'set -e; exec 9<"$2"; mount -t tmpfs -o size=64k,mode=0711,nosuid,nodev,noexec burrow-stage "$1"; ' +
      'cd "$1"; mkdir disk view etc; mount --rbind /proc/self/fd/9 etc; exec 9<&-; ' +
      'mount -t tmpfs -o "$3" burrow-disk disk; ' +
      'mkdir -m 0700 disk/home disk/tmp disk/shm; chown "$4:$4" disk/home disk/tmp disk/shm; ' +
      '"$5" -e "$6" disk view "$4" "$7"; shift 7; exec "$@"',
    'burrow-disk',
    STAGE,
    etcDir,
    `${size}mode=0711,uid=${INNER_ID},gid=${INNER_ID},nosuid,nodev`,
    String(INNER_ID),
    tools.perl,
    IDMAP_VIEW,
    String(UNSHARE_SYSCALL),
    ...dropToInner(tools.setpriv),
  ];
}

/** setpriv from root of the outer user namespace to the instance's uid there. */
export function dropToInner(setpriv: string, deathSignal = false): string[] {
  return [
    setpriv,
    `--reuid=${INNER_ID}`,
    `--regid=${INNER_ID}`,
    '--clear-groups',
    ...(deathSignal ? ['--pdeathsig=SIGKILL'] : []),
    '--',
  ];
}

/** What `probeSubordinate` found: the ranges instances get their ids from, or why not. */
export type SubordinateProbe =
  | { ranges: { uid: IdRange; gid: IdRange }; why?: undefined; fix?: undefined }
  | { ranges?: undefined; why: string; fix: string };

/**
 * Try it once, the way an instance's anchor does: an outer user namespace with one id of each
 * range mapped by newuidmap/newgidmap, a tmpfs and its idmapped view, a file made there as the
 * instance's uid, and that file read back through the view as the server's.
 */
export function probeSubordinate(tools: {
  unshare?: string | undefined;
  sh?: string | undefined;
  perl?: string | undefined;
  setpriv?: string | undefined;
}): SubordinateProbe {
  const { uid, gid } = subordinateRanges();
  const user = (() => {
    try {
      return userInfo().username;
    } catch {
      return String(process.getuid?.());
    }
  })();
  const files = idFiles();
  if (!uid || !gid) {
    return {
      why: `the server's user (${user}) has no range in ${!uid ? '/etc/subuid' : '/etc/subgid'}: every instance's processes run as its uid (${process.getuid?.()}), each instance in user, pid and mount namespaces of its own, so they cannot see or signal each other or the server`,
      fix: addRangeFix(user, files),
    };
  }
  // a uid someone else may run as is no identity of the instance's own
  const conflicts = rangeConflicts(
    { name: user, uid: process.getuid?.() ?? -1 },
    { uid, gid },
    files,
  );
  if (conflicts.length > 0) {
    return {
      why: `the server's subordinate range (/etc/subuid ${showRange(uid)}, /etc/subgid ${showRange(gid)}) is not its own: it overlaps ${conflicts.join(', ')}, so an instance could run as a uid that another user's containers or an account also run as; instances run as the server's uid (${process.getuid?.()}) instead, each in user, pid and mount namespaces of its own`,
      fix: addRangeFix(user, files, { uid, gid }),
    };
  }
  const missing = ['/usr/bin/newuidmap', '/usr/bin/newgidmap'].filter((p) => !isExecutable(p));
  if (missing.length > 0) {
    return {
      why: `${missing.join(' and ')} missing: the ranges in /etc/subuid (${showRange(uid)}) and /etc/subgid (${showRange(gid)}) cannot be mapped`,
      fix: 'apt-get install -y uidmap',
    };
  }
  const { unshare, sh, perl, setpriv } = tools;
  if (!unshare || !sh || !perl || !setpriv) {
    return { why: 'the sandbox tools are missing', fix: 'apt-get install -y util-linux perl-base' };
  }
  const argv = anchorSteps(
    { unshare, sh, perl, setpriv },
    { uid: uid.start, gid: gid.start },
    '/etc',
    1 << 20,
  );
  const split = argv.indexOf('--') + 1;
  const r = spawnSync(
    argv[0]!,
    [
      ...argv.slice(1, split),
      // as root of the outer namespace: the anchor's steps run as a child, then what they made
      // is looked at
      sh,
      '-c',
      'set -e; "$@"; cat /proc/self/uid_map; stat -c "%u" /tmp/disk/home/f /tmp/view/home/f',
      'burrow-probe',
      ...argv.slice(split),
      sh,
      '-c',
      'echo x > /tmp/disk/home/f',
    ],
    { encoding: 'utf8', timeout: 5000, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } },
  );
  // the instance's uid of the outer namespace is the range's first; its file is 1000's on the
  // disk and the outer root's (the server's) in the view
  const lines = `${r.stdout ?? ''}`.trim().split('\n');
  const mapped = lines.some(
    (l) => l.trim().split(/\s+/).join(' ') === `${INNER_ID} ${uid.start} 1`,
  );
  const owners = lines.slice(-2).join(' ');
  if (r.status === 0 && mapped && owners === `${INNER_ID} 0`) return { ranges: { uid, gid } };
  const err = `${r.stderr ?? ''}`.trim().split('\n').slice(-3).join('; ');
  if (/mount_setattr|open_tree|move_mount/.test(err)) {
    return {
      why: `an instance's disk cannot be idmapped for the server (tmpfs needs Linux 6.3 or later): ${err}`,
      fix: 'run a Linux kernel 6.3 or later, or start the server as root',
    };
  }
  if (/unrecognized option/.test(err)) {
    return {
      why: `this unshare cannot map subordinate ids (--map-users came with util-linux 2.38): ${err}`,
      fix: 'install util-linux 2.38 or later, or start the server as root',
    };
  }
  return {
    why: `mapping ${uid.start} of /etc/subuid (${showRange(uid)}) with newuidmap failed: ${err || `exit ${r.status}`}${mapped ? ` (${owners})` : ''}`,
    fix: `check that /etc/subuid and /etc/subgid give ${user} its range and that newuidmap/newgidmap are setuid root (apt-get install --reinstall uidmap); in a container, which drops CAP_SYS_ADMIN, give them file capabilities instead (chmod u-s, setcap cap_setuid=ep newuidmap, cap_setgid=ep newgidmap)`,
  };
}

function isExecutable(path: string): boolean {
  try {
    return (statSync(path).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

/**
 * The ids live instances of this server hold, out of the ranges: never two instances the same,
 * never the server's own uid, never a uid a process on the host already runs as (another server
 * of the same user, say, drawing from the same range).
 */
export class SubordinatePool {
  readonly #uid: IdRange;
  readonly #gid: IdRange;
  readonly #held = new Set<number>();

  constructor(ranges: { uid: IdRange; gid: IdRange }) {
    this.#uid = ranges.uid;
    this.#gid = ranges.gid;
  }

  /** A free pair (the same offset into both ranges); throws when every one is taken. */
  take(): SubordinateIds {
    const span = Math.min(this.#uid.count, this.#gid.count);
    const own = process.getuid?.();
    // random first (two servers of one user rarely pick alike), then every offset in turn
    const first = randomInt(span);
    let running: Set<number> | undefined;
    for (let i = 0; i < span; i++) {
      const offset = (first + i) % span;
      const uid = this.#uid.start + offset;
      if (this.#held.has(uid) || uid === own) continue;
      running ??= uidsRunning();
      if (running.has(uid)) continue;
      this.#held.add(uid);
      return { uid, gid: this.#gid.start + offset };
    }
    throw new Error(`every uid of the subordinate range ${showRange(this.#uid)} is in use`);
  }

  release(ids: SubordinateIds): void {
    this.#held.delete(ids.uid);
  }
}

/**
 * The uids processes on this host run as (every uid of their `Uid:` lines: the owner of
 * `/proc/<pid>` is root for a process that made itself undumpable, as Chromium's do).
 */
function uidsRunning(): Set<number> {
  const uids = new Set<number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const line = /^Uid:\s+(.*)$/m.exec(readFileSync(`/proc/${name}/status`, 'utf8'))?.[1];
      for (const uid of line?.trim().split(/\s+/) ?? []) uids.add(Number(uid));
    } catch {
      /* gone */
    }
  }
  return uids;
}
