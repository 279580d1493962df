import type { ExtensionInfo } from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';
import type { UploadSource } from '../multipart.js';

/** burrow extension: uploaded browser extensions, loaded by `instances.start({ extensions })`. */
export class Extensions {
  constructor(private readonly core: Core) {}

  /**
   * `POST /v1/extensions`: uploads an unpacked Manifest V3 extension as a zip archive (its
   * `manifest.json` at the top, or in the archive's one top folder); streamed as multipart,
   * never retried. Refused with 422 when it is not one, 413 over the server's limit.
   */
  upload(
    file: UploadSource,
    opts: RequestOptions & { filename?: string } = {},
  ): Promise<ExtensionInfo> {
    const { filename, ...rest } = opts;
    const part = {
      source: file,
      filename: filename ?? (typeof file === 'string' ? undefined : 'extension.zip'),
      mediaType: 'application/zip',
    };
    return this.core.request('extensionUpload', { body: {}, file: part }, rest);
  }

  /** `GET /v1/extensions`. */
  list(opts?: RequestOptions): Promise<ExtensionInfo[]> {
    return this.core.request('extensionList', {}, opts);
  }

  /** `DELETE /v1/extensions/{extension_id}`; instances already started with it keep their copy. */
  delete(extensionId: string, opts?: RequestOptions): Promise<{ status: 'success' }> {
    return this.core.request('extensionDelete', { params: { extension_id: extensionId } }, opts);
  }
}
