/**
 * The one place an instance's privilege level is read: which process space (space.ts) its
 * sandbox gets, with the host ids and the disk directory that level needs, chosen once when the
 * sandbox is created.
 */
import type { SandboxHost } from '../host.js';
import { NoneSpace } from './none.js';
import { RootSpace } from './root.js';
import type { ProcessSpace, SpaceContext } from './space.js';
import { SubidsSpace } from './subids.js';
import { UsernsSpace } from './userns.js';

export type {
  DiskPaths,
  NetworkEntry,
  ProcessSpace,
  SandboxMode,
  SpaceContext,
  SpaceLevel,
} from './space.js';

/**
 * The space of a new instance's sandbox (`dir`: its instance directory), made once the sandbox
 * gives it its context. Takes the instance's host ids (given back by `releaseIds`) and, isolated,
 * its directory under the sandbox root.
 */
export async function chooseSpace(
  host: SandboxHost,
  name: string,
  dir: string,
): Promise<(ctx: SpaceContext) => ProcessSpace> {
  if (!host.isolated) return () => new NoneSpace(dir);
  // a host uid the server sets itself (root, or a container's root with CAP_SETUID), else one of
  // a normal user's subordinate range, where it has one
  const uid = host.support.ownUid ? host.allocateUid() : undefined;
  const subids = uid === undefined ? host.allocateSubordinate() : undefined;
  const diskDir = await host.instanceDir(name);
  if (host.support.level === 'root') {
    // the root level always sets a uid of its own (support.ts: `ownUid`)
    if (uid === undefined) throw new Error('the root level without a host uid to give');
    return (ctx) => new RootSpace(ctx, diskDir, uid);
  }
  if (subids) return (ctx) => new SubidsSpace(ctx, diskDir, subids);
  return (ctx) => new UsernsSpace(ctx, diskDir, uid);
}
