import type {
  AuthState,
  DeleteAuthStateResult,
  ImportAuthStateResult,
  StorageState,
  StorageStateInput,
} from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/** Saved browser authentication states of the whole account. */
export class AuthStates {
  constructor(private readonly core: Core) {}

  /** `GET /v1/auth_states`. */
  list(opts?: RequestOptions): Promise<AuthState[]> {
    return this.core.request('listAuthStates', {}, opts);
  }

  /**
   * burrow extension, `GET /v1/auth_states/{auth_state_id}/storage_state`: the state as
   * Playwright's `storageState` JSON (cookies, localStorage and IndexedDB per origin), ready for
   * `browser.newContext({ storageState })`.
   */
  storageState(authStateId: string, opts?: RequestOptions): Promise<StorageState> {
    return this.core.request(
      'authStateStorageState',
      { params: { auth_state_id: authStateId } },
      opts,
    );
  }

  /**
   * burrow extension, `POST /v1/auth_states/import?name=`: saves a Playwright `storageState`
   * (e.g. from `context.storageState({ indexedDB: true })`). With a name one state already has,
   * that state is replaced (same id); several states of that name answer 409.
   */
  import(
    storageState: StorageStateInput,
    query: { name?: string } = {},
    opts?: RequestOptions,
  ): Promise<ImportAuthStateResult> {
    return this.core.request('authStateImport', { query, body: storageState }, opts);
  }

  /** burrow extension, `POST /v1/auth_states/{auth_state_id}/delete`. */
  delete(authStateId: string, opts?: RequestOptions): Promise<DeleteAuthStateResult> {
    return this.core.request('authStateDelete', { params: { auth_state_id: authStateId } }, opts);
  }
}
