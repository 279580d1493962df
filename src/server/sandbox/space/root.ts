/**
 * The root level: a server that is root with CAP_SYS_ADMIN. Each instance gets a host uid of its
 * own (`SandboxHost.allocateUid`), never 0, owning nothing on the host but the instance's disk;
 * inside, that uid is `user` (1000) in a user namespace that maps nothing else.
 *
 *   anchor:  perl (cgroup, close_range)  →  setpriv --reuid U --pdeathsig  →  bwrap
 *            --unshare-user --unshare-pid --as-pid-1 --unshare-net/ipc/uts/cgroup …  →  pid 1
 *   others:  perl (cgroup, close_range)  →  nsenter --net --ipc --uts --cgroup (as root)  →
 *            setpriv --reuid U --pdeathsig  →  bwrap --userns --pidns --cap-drop ALL --seccomp …
 *            →  sh (closes the two namespace descriptors)  →  command
 *   listen:  perl (cgroup, close_range)  →  perl: setns into the network namespace, as root
 *
 * `nsenter` joins the network, IPC, UTS and cgroup namespaces as root; bubblewrap then joins the
 * user and pid namespaces as the instance's uid, the owner of its user namespace (isolated.ts).
 */
import type { ChainFds } from './chain.js';
import { dropToUid } from './chain.js';
import { IsolatedSpace, type Anchor } from './isolated.js';
import type { SpaceContext } from './space.js';

export class RootSpace extends IsolatedSpace {
  readonly level = 'root';
  readonly uid: number;

  constructor(ctx: SpaceContext, diskDir: string, uid: number) {
    super(ctx, diskDir);
    this.uid = uid;
  }

  protected get hostUid(): number {
    return this.uid;
  }

  /** The anchor starts beside the disk: its pid 1 binds none of the instance's directories. */
  protected anchorNeeds(ready: { cgroup: Promise<void> | undefined }): unknown[] {
    return [ready.cgroup];
  }

  protected anchorSteps(): string[] {
    return dropToUid(this.tools.setpriv, this.uid);
  }

  protected joinSteps({ init }: Anchor): string[] {
    return [
      this.tools.nsenter,
      `--net=/proc/${init}/ns/net`,
      `--ipc=/proc/${init}/ns/ipc`,
      `--uts=/proc/${init}/ns/uts`,
      `--cgroup=/proc/${init}/ns/cgroup`,
      '--',
      ...dropToUid(this.tools.setpriv, this.uid),
    ];
  }

  protected networkSteps(
    fds: ChainFds,
    { init }: Anchor,
  ): { steps: string[]; namespaces: number[] } {
    return { steps: [], namespaces: [fds.open(`/proc/${init}/ns/net`)] };
  }

  releaseIds(): void {
    this.host.releaseUid(this.uid);
  }
}
