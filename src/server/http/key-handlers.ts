/**
 * The handlers of the key routes (`POST /v1/keys`, `GET /v1/keys`, `DELETE /v1/keys/{key_id}`),
 * and the principal a handler runs for: the admin's only; without a cluster, 501. Who asks is
 * set by cluster/keys.ts around every handler of a cluster node.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { KeyCreated, KeyInfo } from '../../api/index.js';
import type { Principal, ProjectKeys } from '../cluster/keys.js';
import { serverError } from '../errors.js';

/** The principal the current handler runs for (set by `KeyScope.bind`, cluster/keys.ts). */
export const running = new AsyncLocalStorage<Principal>();

export function keyHandlers(keys: ProjectKeys | undefined) {
  const admin = () => {
    if (!keys) throw serverError('keys_need_cluster');
    if (running.getStore()?.admin !== true) {
      throw serverError('admin_key_required', { what: 'Managing API keys' });
    }
    return keys;
  };
  return {
    keyCreate: async ({
      body,
    }: {
      body: { project: string; name?: string | undefined };
    }): Promise<KeyCreated> => admin().create(body.project, body.name ?? null),
    keyList: async (): Promise<KeyInfo[]> => admin().list(),
    keyRevoke: async ({
      params,
    }: {
      params: { key_id: string };
    }): Promise<{ status: 'success' }> => {
      if (!(await admin().revoke(params.key_id))) {
        throw serverError('key_not_found', { id: JSON.stringify(params.key_id) });
      }
      return { status: 'success' };
    },
  };
}
