/**
 * The spawn plan: the part of every instance process's start that is the same for all instances
 * of a server run, worked out once (`SandboxHost.plan`) instead of at each spawn. It holds the
 * absolute paths of the programs of the root-side chain and the file system bubblewrap builds,
 * as typed steps (rootfs.ts) with host paths already resolved. A spawn adds only what belongs to
 * its instance and to itself: the namespaces of the instance's pid 1, its uid and cgroup, the
 * descriptors of its directories, the environment, the working directory (space/isolated.ts).
 *
 * What the plan holds is read from the host when it is built: a tool installed, or a font cache
 * created, after that is seen by the next server run.
 */
import { hostPrivateNow, initMounts, instanceMounts, type MountStep } from './rootfs.js';
import { toolPath, type Tool } from './support.js';

/** The programs of the root-side chain (space/), by absolute path. */
export type ChainTools = Readonly<
  Record<'perl' | 'nsenter' | 'setpriv' | 'bwrap' | 'unshare' | 'sh', string>
>;

export interface SpawnPlan {
  readonly tools: ChainTools;
  /** The file system of every process of an instance but its pid 1. */
  readonly instance: readonly MountStep[];
  /** The file system of an instance's pid 1 (the anchor's shell). */
  readonly init: readonly MountStep[];
  /** Which of the host's private directories the mount steps mask (`hostPrivateNow`). */
  readonly masked: string;
}

/**
 * Resolve the plan from the host as it is now (`bwrapPath`: the operator's bubblewrap, where it
 * exists). Throws naming a tool the chain needs and lacks.
 */
export function buildSpawnPlan(bwrapPath?: string): SpawnPlan {
  const need = (tool: Tool): string => {
    const path = toolPath(tool, bwrapPath);
    if (!path) throw new Error(`the sandbox needs ${tool}, which is not installed`);
    return path;
  };
  const tools: ChainTools = Object.freeze({
    perl: need('perl'),
    nsenter: need('nsenter'),
    setpriv: need('setpriv'),
    bwrap: need('bwrap'),
    // the user-namespace chain's anchor (space/userns.ts)
    unshare: need('unshare'),
    sh: need('sh'),
  });
  const freeze = (steps: MountStep[]) => Object.freeze(steps.map((s) => Object.freeze(s)));
  return Object.freeze({
    tools,
    masked: hostPrivateNow(),
    instance: freeze(instanceMounts()),
    init: freeze(initMounts()),
  });
}
