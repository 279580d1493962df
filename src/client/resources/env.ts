import type {
  EnvDeleteRequest,
  EnvGetResult,
  EnvSetRequest,
  EnvStatusResult,
} from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/** Environment variables of an instance. */
export class Env {
  constructor(private readonly core: Core) {}

  /** `GET /v1/instance/{instance_id}/env`. */
  get(instanceId: string, opts?: RequestOptions): Promise<EnvGetResult> {
    return this.core.request('envGet', { params: { instance_id: instanceId } }, opts);
  }

  /** `POST /v1/instance/{instance_id}/env`. */
  set(instanceId: string, body: EnvSetRequest, opts?: RequestOptions): Promise<EnvStatusResult> {
    return this.core.request('envSet', { params: { instance_id: instanceId }, body }, opts);
  }

  /** `POST /v1/instance/{instance_id}/env/delete`. */
  delete(
    instanceId: string,
    body: EnvDeleteRequest,
    opts?: RequestOptions,
  ): Promise<EnvStatusResult> {
    return this.core.request('envDelete', { params: { instance_id: instanceId }, body }, opts);
  }
}
