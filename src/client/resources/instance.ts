import type {
  BashRequest,
  ComputerAction,
  EditRequest,
  FileRequest,
  ScreenshotResult,
  StreamUrlResult,
  ToolResult,
  UploadFields,
  UploadResult,
} from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';
import type { UploadSource } from '../multipart.js';

export interface UploadInput extends UploadFields {
  /** Streamed, never buffered whole: a local file path, bytes, a Blob/File, or a stream. */
  file: UploadSource;
  /** Default: the source's file name, else the last segment of `path`. */
  filename?: string | undefined;
  /** Default: the Blob's type, else `application/octet-stream`. */
  mediaType?: string | undefined;
}

/** Observation, input and files of one instance. */
export class InstanceTools {
  constructor(private readonly core: Core) {}

  /** `POST /v1/instance/{instance_id}/screenshot`: a base64 PNG. */
  screenshot(instanceId: string, opts?: RequestOptions): Promise<ScreenshotResult> {
    return this.core.request('screenshot', { params: { instance_id: instanceId } }, opts);
  }

  /** `GET /v1/instance/{instance_id}/stream_url`: the live view. */
  streamUrl(instanceId: string, opts?: RequestOptions): Promise<StreamUrlResult> {
    return this.core.request('streamUrl', { params: { instance_id: instanceId } }, opts);
  }

  /** `POST /v1/instance/{instance_id}/computer`: one mouse, keyboard or screen action. */
  computer(instanceId: string, body: ComputerAction, opts?: RequestOptions): Promise<ToolResult> {
    return this.core.request('computer', { params: { instance_id: instanceId }, body }, opts);
  }

  /** `POST /v1/instance/{instance_id}/bash`. */
  bash(instanceId: string, body: BashRequest = {}, opts?: RequestOptions): Promise<ToolResult> {
    return this.core.request('bash', { params: { instance_id: instanceId }, body }, opts);
  }

  /** `POST /v1/instance/{instance_id}/edit`. */
  edit(instanceId: string, body: EditRequest, opts?: RequestOptions): Promise<ToolResult> {
    return this.core.request('edit', { params: { instance_id: instanceId }, body }, opts);
  }

  /** `POST /v1/instance/{instance_id}/file`. */
  file(instanceId: string, body: FileRequest, opts?: RequestOptions): Promise<ToolResult> {
    return this.core.request('file', { params: { instance_id: instanceId }, body }, opts);
  }

  /** `POST /v1/instance/{instance_id}/upload` as streamed multipart; never retried. */
  upload(instanceId: string, input: UploadInput, opts?: RequestOptions): Promise<UploadResult> {
    const { file, filename, mediaType, ...body } = input;
    const part = { source: file, filename, mediaType };
    return this.core.request(
      'upload',
      { params: { instance_id: instanceId }, body, file: part },
      opts,
    );
  }
}
