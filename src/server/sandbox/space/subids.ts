/**
 * The subordinate-id level: a normal user's server with a range in /etc/subuid and /etc/subgid
 * (../subids.ts). The user-namespace chain (userns.ts), with the outer user namespace mapping the
 * server's uid to its root and the instance's own host uid (one of the range) to `user` (1000):
 * every process of the instance runs as that host uid, which owns nothing of the server's or of
 * another instance. The server cannot chown to it (`uid` stays undefined); it reaches the disk
 * through the anchor's idmapped view of it, where the instance's files read as its own, and binds
 * the disk itself into the instance.
 *
 *   anchor:  perl (cgroup, close_range)  →  setpriv --pdeathsig  →  unshare --user
 *            --map-users/--map-groups (newuidmap) --mount  →  sh: stage, disk, /etc, the
 *            server's idmapped view  →  setpriv --reuid 1000  →  bwrap --unshare-user
 *            --unshare-pid --as-pid-1 …  →  pid 1
 *   others:  perl (cgroup, close_range)  →  nsenter --preserve-credentials --user(outer)
 *            --mount(outer) --net --ipc --uts --cgroup  →  setpriv --reuid 1000 --pdeathsig  →
 *            bwrap --userns --pidns --cap-drop ALL --seccomp …  →  sh (closes the two namespace
 *            descriptors)  →  command
 *   listen:  perl (cgroup, close_range)  →  perl: setns into the outer user namespace, then the
 *            network namespace
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { anchorSteps, dropToInner, STAGE, type SubordinateIds } from '../subids.js';
import { deathSignal, type ChainFds } from './chain.js';
import { IsolatedSpace, type Anchor } from './isolated.js';
import type { SpaceContext } from './space.js';
import { enterOuter, outerNetwork } from './userns.js';

export class SubidsSpace extends IsolatedSpace {
  readonly level = 'subids';
  readonly uid = undefined;
  readonly #ids: SubordinateIds;

  constructor(ctx: SpaceContext, diskDir: string, ids: SubordinateIds) {
    super(ctx, diskDir);
    this.#ids = ids;
  }

  protected get hostUid(): number {
    return this.#ids.uid;
  }

  /** The anchor mounts the disk itself, and so waits for its directory. */
  protected anchorNeeds(ready: {
    cgroup: Promise<void> | undefined;
    disk: Promise<void>;
  }): unknown[] {
    return [ready.cgroup, ready.disk];
  }

  /**
   * The anchor mounts the disk (a tmpfs, of the quota's size or unsized: the server's view of it
   * needs a file system of the namespace's) and makes the three directories on it.
   */
  override async makeDisk(): Promise<void> {
    const host = this.host;
    const quota = host.limits.diskBytes > 0 && host.support.quotaKind === 'tmpfs';
    this.tmpfsBytes = quota ? host.limits.diskBytes : 0;
    await mkdir(join(this.diskDir, 'disk'), { recursive: true, mode: 0o700 });
  }

  protected anchorSteps(): string[] {
    const { tools } = this;
    const steps = anchorSteps(tools, this.#ids, this.host.etcDir, this.tmpfsBytes);
    return [...deathSignal(tools.setpriv), ...steps];
  }

  /** Down to the instance's uid, the owner of its user namespace, after `nsenter`. */
  protected joinSteps(at: Anchor): string[] {
    return [...enterOuter(this.tools, at), ...dropToInner(this.tools.setpriv, true)];
  }

  protected networkSteps(fds: ChainFds, at: Anchor): { steps: string[]; namespaces: number[] } {
    return { steps: [], namespaces: outerNetwork(fds, at) };
  }

  /**
   * The disk exists in the anchor's mount namespace only: the server's own files there go through
   * the idmapped view, and the instance gets the disk itself (../subids.ts).
   */
  protected override afterAnchor({ anchor }: Anchor): void {
    const root = `/proc/${anchor}/root`;
    const disk = `${root}${STAGE}/disk`;
    const view = `${root}${STAGE}/view`;
    const from = (d: string) => join(disk, d);
    this.bindFrom = {
      home: from('home'),
      tmp: from('tmp'),
      shm: from('shm'),
      etc: `${root}${STAGE}/etc`,
    };
    this.disk.home = join(view, 'home');
    this.disk.tmp = join(view, 'tmp');
    this.disk.shm = join(view, 'shm');
  }

  releaseIds(): void {
    this.host.releaseSubordinate(this.#ids);
  }
}
