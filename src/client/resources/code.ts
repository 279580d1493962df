import type { CodeExecuteRequest, CodeExecuteResult } from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/** Code execution on a kernel, without a notebook. */
export class Code {
  constructor(private readonly core: Core) {}

  /** `POST /v1/instance/{instance_id}/code/execute`. Not retried. */
  execute(
    instanceId: string,
    body: CodeExecuteRequest,
    opts?: RequestOptions,
  ): Promise<CodeExecuteResult> {
    return this.core.request('codeExecute', { params: { instance_id: instanceId }, body }, opts);
  }
}
