import type { ProfileInfo } from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/**
 * burrow extension: persistent browser profiles, restored by
 * `instances.start({ profile: { name, save_changes } })`.
 */
export class Profiles {
  constructor(private readonly core: Core) {}

  /** `GET /v1/profiles`: each saved profile, its size and the instance holding it, if any. */
  list(opts?: RequestOptions): Promise<ProfileInfo[]> {
    return this.core.request('profileList', {}, opts);
  }

  /** `DELETE /v1/profiles/{profile_name}`; 409 while an instance holds it. */
  delete(name: string, opts?: RequestOptions): Promise<{ status: 'success' }> {
    return this.core.request('profileDelete', { params: { profile_name: name } }, opts);
  }
}
