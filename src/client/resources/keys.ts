import type { KeyCreated, KeyCreateRequest, KeyInfo } from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/**
 * burrow extension, cluster mode: API keys of projects. Every call needs the admin key (the
 * server's own); a single server without `--cluster` answers 501.
 */
export class Keys {
  constructor(private readonly core: Core) {}

  /** `POST /v1/keys`: a new key of `project`. The answer's `key` is shown this once only. */
  create(body: KeyCreateRequest, opts?: RequestOptions): Promise<KeyCreated> {
    return this.core.request('keyCreate', { body }, opts);
  }

  /** `GET /v1/keys`: every key (id, project, name, last four characters), never the key itself. */
  list(opts?: RequestOptions): Promise<KeyInfo[]> {
    return this.core.request('keyList', {}, opts);
  }

  /** `DELETE /v1/keys/{key_id}`: the key stops working on every node at once. */
  revoke(id: string, opts?: RequestOptions): Promise<{ status: 'success' }> {
    return this.core.request('keyRevoke', { params: { key_id: id } }, opts);
  }
}
