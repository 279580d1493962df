/**
 * The status guard of the registry's operations on an instance (gVisor's `requireStatus`): an
 * action names the statuses it takes, and an instance in any other is refused with that action's
 * answer, one row per action here instead of a check written out at each operation.
 */
import type { InstanceStatus } from '../../api/index.js';
import { serverError, type HttpError } from '../errors.js';

/** An instance as the guard sees it. */
interface Guarded {
  readonly id: string;
  readonly status: InstanceStatus;
}

/** 400 saying where an instance that is not running is. */
const notRunning = ({ id, status }: Guarded) =>
  serverError('instance_not_running', {
    id,
    state: status === 'deploying' ? 'still deploying' : status,
  });

/** What each guarded action answers an instance in a status it does not take. */
const REFUSALS = {
  // a capability, or anything else that needs its processes
  use: notRunning,
  pause: notRunning,
  resume: ({ id, status }: Guarded) => serverError('instance_not_paused', { id, status }),
  // its deadline set again: 410 once it has ended
  extend: ({ id, status }: Guarded) => serverError('instance_gone', { id, state: status }),
} satisfies Record<string, (rec: Guarded) => HttpError>;

export type GuardedAction = keyof typeof REFUSALS;

/** The answer of `action` refused to `rec` as it is now. */
export function refusal(action: GuardedAction, rec: Guarded): HttpError {
  return REFUSALS[action](rec);
}

/** `rec` when its status is one of `statuses`; else throws what `action` answers. */
export function requireStatus<R extends Guarded>(
  rec: R,
  action: GuardedAction,
  ...statuses: readonly InstanceStatus[]
): R {
  if (!statuses.includes(rec.status)) throw refusal(action, rec);
  return rec;
}
