/**
 * The user-namespace level: a server that is not root, or root without CAP_SYS_ADMIN (a
 * container's), which cannot `nsenter` into namespaces from the host's initial user namespace. The
 * anchor is two user namespaces deep: an outer one (the server's uid, or the instance's, as its
 * root) that owns the instance's mount namespace with its disk, and inside it the instance's own,
 * which owns its pid, network, IPC, UTS and cgroup namespaces. A container's root with CAP_SETUID
 * first drops to the instance's own host uid (`uid`), which then owns both user namespaces;
 * without it every instance runs as the server's uid, each in namespaces of its own.
 *
 *   anchor:  perl (cgroup, close_range)  →  setpriv [--reuid U] --pdeathsig  →  unshare --user
 *            --map-root-user --mount  [→ sh: mount the tmpfs disk, make home, tmp, shm]  →  bwrap
 *            --unshare-user --unshare-pid --as-pid-1 …  →  pid 1
 *   others:  perl (cgroup, close_range)  →  [setpriv --reuid U]  →  nsenter --preserve-credentials
 *            --user(outer) --mount(outer) --net --ipc --uts --cgroup  →  setpriv --pdeathsig  →
 *            bwrap --userns --pidns --cap-drop ALL --seccomp …  →  sh (closes the two namespace
 *            descriptors)  →  command
 *   listen:  perl (cgroup, close_range)  →  [setpriv --reuid U]  →  perl: setns into the outer
 *            user namespace, then the network namespace
 *
 * `nsenter` joins the outer user namespace (the server owns it, so it may), which gives it the
 * capabilities there that joining the instance's network, IPC, UTS, cgroup and mount namespaces
 * needs; bubblewrap, as root of the outer namespace, then joins the inner user namespace and the
 * pid namespace (`--userns/--pidns`), exactly as at the root level, and drops every capability.
 * Capabilities held in the outer namespace reach nothing of the host: its mount namespace is a
 * copy, and it owns no other namespace of the host.
 */
import { chown, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChainTools } from '../plan.js';
import { deathSignal, dropToUid, type ChainFds } from './chain.js';
import { IsolatedSpace, type Anchor } from './isolated.js';
import type { SpaceContext } from './space.js';

/**
 * The way into an instance's namespaces from the server's own user namespace, shared with the
 * subordinate-id level (subids.ts): `nsenter` into the anchor's (outer) user and mount namespaces
 * and pid 1's network, IPC, UTS and cgroup namespaces.
 */
export function enterOuter(tools: ChainTools, { init, anchor }: Anchor): string[] {
  return [
    tools.nsenter,
    '--preserve-credentials',
    `--user=/proc/${anchor}/ns/user`,
    `--mount=/proc/${anchor}/ns/mnt`,
    `--net=/proc/${init}/ns/net`,
    `--ipc=/proc/${init}/ns/ipc`,
    `--uts=/proc/${init}/ns/uts`,
    `--cgroup=/proc/${init}/ns/cgroup`,
    '--',
  ];
}

/**
 * The namespaces the listen step joins at the user-namespace levels, in this order: the outer
 * user namespace first, whose capabilities joining the network namespace needs.
 */
export function outerNetwork(fds: ChainFds, { init, anchor }: Anchor): number[] {
  return [fds.open(`/proc/${anchor}/ns/user`), fds.open(`/proc/${init}/ns/net`)];
}

export class UsernsSpace extends IsolatedSpace {
  readonly level = 'userns';
  readonly uid: number | undefined;
  /** The anchor mounts the disk as a tmpfs of `tmpfsBytes` (the host's quota kind). */
  #tmpfs = false;

  constructor(ctx: SpaceContext, diskDir: string, uid: number | undefined) {
    super(ctx, diskDir);
    this.uid = uid;
  }

  protected get hostUid(): number {
    return this.uid ?? process.getuid?.() ?? 0;
  }

  /** The anchor mounts the disk itself, and so waits for its directory. */
  protected anchorNeeds(ready: {
    cgroup: Promise<void> | undefined;
    disk: Promise<void>;
  }): unknown[] {
    return [ready.cgroup, ready.disk];
  }

  /** With a quota, the anchor mounts the disk (a tmpfs) and makes the three directories on it. */
  override async makeDisk(): Promise<void> {
    const host = this.host;
    if (!(host.limits.diskBytes > 0 && host.support.quotaKind === 'tmpfs')) {
      return super.makeDisk();
    }
    this.#tmpfs = true;
    this.tmpfsBytes = host.limits.diskBytes;
    const disk = join(this.diskDir, 'disk');
    await mkdir(disk, { recursive: true, mode: 0o700 });
    if (this.uid !== undefined) await chown(disk, this.uid, this.uid);
  }

  /**
   * [setpriv to the instance's uid, where the server can give it one] → `unshare` making the
   * outer user namespace (the caller as its root) with a mount namespace of its own → with a
   * quota, a shell mounting the instance's disk there as a tmpfs of the quota's size and making
   * home, tmp and shm on it.
   */
  protected anchorSteps(): string[] {
    const { tools } = this;
    return [
      ...(this.uid !== undefined ? dropToUid(tools.setpriv, this.uid) : deathSignal(tools.setpriv)),
      tools.unshare,
      '--user',
      '--map-root-user',
      '--mount',
      '--propagation',
      'private',
      '--',
      ...(this.#tmpfs
        ? [
            tools.sh,
            '-c',
            'set -e; mount -t tmpfs -o "size=$1,mode=0711,nosuid,nodev" burrow-disk "$2"; ' +
              'cd "$2"; mkdir -m 0700 home tmp shm; shift 2; exec "$@"',
            'burrow-disk',
            String(this.tmpfsBytes),
            join(this.diskDir, 'disk'),
          ]
        : []),
    ];
  }

  protected joinSteps(at: Anchor): string[] {
    const { tools } = this;
    return [
      ...(this.uid !== undefined ? dropToUid(tools.setpriv, this.uid, false) : []),
      ...enterOuter(tools, at),
      ...deathSignal(tools.setpriv),
    ];
  }

  protected networkSteps(fds: ChainFds, at: Anchor): { steps: string[]; namespaces: number[] } {
    const namespaces = outerNetwork(fds, at);
    // a container's root owns nothing of the instance's namespaces: the instance's uid does
    const steps = this.uid !== undefined ? dropToUid(this.tools.setpriv, this.uid, false) : [];
    return { steps, namespaces };
  }

  /** The disk exists in the anchor's mount namespace only: the server reaches it from there. */
  protected override afterAnchor({ anchor }: Anchor): void {
    if (!this.#tmpfs) return;
    const disk = `/proc/${anchor}/root${join(this.diskDir, 'disk')}`;
    this.disk.home = join(disk, 'home');
    this.disk.tmp = join(disk, 'tmp');
    this.disk.shm = join(disk, 'shm');
  }

  releaseIds(): void {
    if (this.uid !== undefined) this.host.releaseUid(this.uid);
  }
}
