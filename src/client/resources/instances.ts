import type { Instance, StartRequest, StatusResult } from '../../api/index.js';
import type { Core, Query, RequestOptions } from '../core.js';

export type ResumeQuery = Query<'resume'>;

/** Instance lifecycle. */
export class Instances {
  constructor(private readonly core: Core) {}

  /** `POST /v1/start`. Retried only if the connection could not be opened. */
  start(body: StartRequest = {}, opts?: RequestOptions): Promise<Instance> {
    return this.core.request('start', { body }, opts);
  }

  /** `GET /v1/instance/{instance_id}`. */
  get(instanceId: string, opts?: RequestOptions): Promise<Instance> {
    return this.core.request('getInstance', { params: { instance_id: instanceId } }, opts);
  }

  /** `GET /v1/instances`. */
  list(opts?: RequestOptions): Promise<Instance[]> {
    return this.core.request('listInstances', {}, opts);
  }

  /** `POST /v1/instance/{instance_id}/stop`. */
  stop(instanceId: string, opts?: RequestOptions): Promise<StatusResult> {
    return this.core.request('stop', { params: { instance_id: instanceId } }, opts);
  }

  /** `POST /v1/instance/{instance_id}/pause`. */
  pause(instanceId: string, opts?: RequestOptions): Promise<StatusResult> {
    return this.core.request('pause', { params: { instance_id: instanceId } }, opts);
  }

  /** `POST /v1/instance/{instance_id}/resume`; `timeout_hours` (default 1) restarts the clock. */
  resume(instanceId: string, query: ResumeQuery = {}, opts?: RequestOptions): Promise<Instance> {
    return this.core.request('resume', { params: { instance_id: instanceId }, query }, opts);
  }
}
