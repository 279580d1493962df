import type { AuthState } from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/** Saved browser authentication states of the whole account. */
export class AuthStates {
  constructor(private readonly core: Core) {}

  /** `GET /v1/auth_states`. */
  list(opts?: RequestOptions): Promise<AuthState[]> {
    return this.core.request('listAuthStates', {}, opts);
  }
}
