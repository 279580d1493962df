import type { Download, Recording, RecordingStartResult } from '../../api/index.js';
import type { Core, RequestOptions, StreamResponse } from '../core.js';

/**
 * burrow extension: downloads an instance's browser made (kept in the instance, and for a while
 * after it stopped). `id` is Chromium's download GUID, as in CDP's download events.
 */
export class Downloads {
  constructor(private readonly core: Core) {}

  /** `GET /v1/instance/{instance_id}/downloads`. */
  list(instanceId: string, opts?: RequestOptions): Promise<Download[]> {
    return this.core.request('listDownloads', { params: { instance_id: instanceId } }, opts);
  }

  /**
   * `GET /v1/instance/{instance_id}/downloads/{download_id}`: the bytes, unread (pipe `body`
   * somewhere, or destroy it). 409 while the download is in progress.
   */
  get(instanceId: string, downloadId: string, opts?: RequestOptions): Promise<StreamResponse> {
    const params = { instance_id: instanceId, download_id: downloadId };
    return this.core.request('getDownload', { params }, opts);
  }
}

/** burrow extension: video clips of an instance's screen (MP4, H.264). */
export class Recordings {
  constructor(private readonly core: Core) {}

  /** `POST /v1/instance/{instance_id}/recording/start`; one clip at a time (409 otherwise). */
  start(instanceId: string, opts?: RequestOptions): Promise<RecordingStartResult> {
    return this.core.request('recordingStart', { params: { instance_id: instanceId } }, opts);
  }

  /** `POST /v1/instance/{instance_id}/recording/stop`: the finished clip. */
  stop(instanceId: string, opts?: RequestOptions): Promise<Recording> {
    return this.core.request('recordingStop', { params: { instance_id: instanceId } }, opts);
  }

  /** `GET /v1/instance/{instance_id}/recordings`. */
  list(instanceId: string, opts?: RequestOptions): Promise<Recording[]> {
    return this.core.request('listRecordings', { params: { instance_id: instanceId } }, opts);
  }

  /** `GET /v1/instance/{instance_id}/recordings/{recording_id}`: the MP4, unread. */
  get(instanceId: string, recordingId: string, opts?: RequestOptions): Promise<StreamResponse> {
    const params = { instance_id: instanceId, recording_id: recordingId };
    return this.core.request('getRecording', { params }, opts);
  }
}
