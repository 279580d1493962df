import type { DrainResult } from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/**
 * burrow extension: the node the client's base URL reaches (a node's own URL, not a load
 * balancer's: the node that answers is the one acted on). Admin key only.
 */
export class Node {
  constructor(private readonly core: Core) {}

  /**
   * `POST /v1/node/drain`: the node takes no new instances from now on and its readiness turns
   * false; its running instances go on until they end or the answer's `deadline`, then it exits.
   * Asking again changes nothing (the same deadline).
   */
  drain(opts?: RequestOptions): Promise<DrainResult> {
    return this.core.request('nodeDrain', {}, opts);
  }
}
