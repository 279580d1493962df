import type { VersionResult } from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/** burrow extension: what the server says about itself. */
export class Meta {
  constructor(private readonly core: Core) {}

  /** `GET /v1/version`: burrow's version, the API version and the Chromium of browser instances. */
  version(opts?: RequestOptions): Promise<VersionResult> {
    return this.core.request('version', {}, opts);
  }
}
