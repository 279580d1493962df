import type {
  ExtendRequest,
  Handoff,
  HandoffRequest,
  Instance,
  StartRequest,
  StatusResult,
} from '../../api/index.js';
import type { Core, Query, RequestOptions } from '../core.js';

export type ResumeQuery = Query<'resume'>;
export type HandoffWaitQuery = Query<'handoffGet'>;

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

  // burrow extensions: hand-off to a person, and session time

  /**
   * `POST /v1/instance/{instance_id}/extend`: the instance now expires `timeout_hours` from now
   * (not added to the time it had left). Answers the instance with its new `expires_at`.
   */
  extend(instanceId: string, body: ExtendRequest, opts?: RequestOptions): Promise<Instance> {
    return this.core.request('extend', { params: { instance_id: instanceId }, body }, opts);
  }

  /**
   * `POST /v1/instance/{instance_id}/handoff`: a live view for a person, with `message` and a
   * Done button, behind a token of its own (`url`), until `timeout_seconds` (default 600) pass.
   */
  handoff(instanceId: string, body: HandoffRequest, opts?: RequestOptions): Promise<Handoff> {
    return this.core.request('handoffCreate', { params: { instance_id: instanceId }, body }, opts);
  }

  /**
   * `GET /v1/instance/{instance_id}/handoff/{handoff_id}`: its status, after waiting up to
   * `wait_seconds` (default 30, at most 60; 0 answers at once) for it to end. A client whose
   * `timeoutMs` is shorter than the wait needs a longer one in `opts`.
   */
  handoffStatus(
    instanceId: string,
    handoffId: string,
    query: HandoffWaitQuery = {},
    opts?: RequestOptions,
  ): Promise<Handoff> {
    const params = { instance_id: instanceId, handoff_id: handoffId };
    return this.core.request('handoffGet', { params, query }, opts);
  }
}
