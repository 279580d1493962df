/**
 * Uploads: the multipart file stream goes, in chunks of at most `UPLOAD_CHUNK_BYTES`, to a temp
 * file in the destination directory, written inside the sandbox as the instance's user (the
 * toolbox), then fsynced and renamed into place. The next chunk is read only once the toolbox has
 * written the previous one, so the server holds about one chunk per upload. On any error (the
 * route's size limit, a full disk, a client that went away) the temp file is removed: nothing
 * half-written is left.
 */
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type { UploadResult } from '../../api/index.js';
import { failureText, isToolFailure } from '../computer/failure.js';
import { serverError } from '../errors.js';
import type { FileUpload, InstanceFiles } from './fsops.js';

/** Bytes sent to the toolbox per request. */
export const UPLOAD_CHUNK_BYTES = 1024 * 1024;

/**
 * Store `file` at `path` (relative to home). A `path` ending in `/`, or naming an existing
 * directory, receives the file under its own (base)name; otherwise `path` is the file's path.
 */
export async function upload(
  files: InstanceFiles,
  path: string,
  filename: string,
  mediaType: string | undefined,
  file: Readable,
  maxBytes: number,
): Promise<UploadResult> {
  const name = safeName(filename);
  let sink: FileUpload;
  try {
    const st = await files.stat(path);
    const intoDir = path.endsWith('/') || st.type === 'dir';
    sink = await files.openUpload(
      intoDir
        ? { path: posix.join(st.path, name), display: posix.join(st.display, name) }
        : { path, display: st.display },
    );
  } catch (err) {
    file.resume(); // let the request finish; the route answers with the error
    throw httpError(err, files.display(path));
  }
  // a multipart size limit ends the stream early, marked `truncated` (busboy) after a 'limit'
  let limited = false;
  file.once('limit', () => (limited = true));
  const tooLarge = () => serverError('upload_too_large', { limit: maxBytes });
  try {
    let size = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const flush = async () => {
      if (pendingBytes === 0) return;
      const chunk = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await sink.write(chunk);
    };
    for await (const chunk of file as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) throw tooLarge();
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (pendingBytes >= UPLOAD_CHUNK_BYTES) await flush();
    }
    if (limited || (file as Readable & { truncated?: boolean }).truncated) throw tooLarge();
    await flush();
    await sink.commit();
  } catch (err) {
    await sink.abort();
    throw httpError(err, sink.display);
  }
  const result: UploadResult = { filename: name, path: sink.path };
  if (mediaType !== undefined) result.media_type = mediaType;
  return result;
}

/**
 * The HTTP answer for a failed upload: 413 when the instance's disk is full, 503 when its file
 * operations are unavailable, 400 for other refusals (read-only, a directory ...). Other errors
 * (the request stream's own) stay as they are.
 */
function httpError(err: unknown, display: string): unknown {
  if (!isToolFailure(err)) return err;
  if (err.code === 'ENOSPC' || err.code === 'EDQUOT')
    return serverError('disk_full', { reason: err.message });
  if (err.code === 'UNAVAILABLE') return serverError('files_unavailable', { reason: err.message });
  return serverError('upload_refused', { reason: failureText(err, display) });
}

function safeName(filename: string): string {
  const base = posix.basename(filename.replaceAll('\\', '/').replaceAll('\0', ''));
  return base === '' || base === '.' || base === '..' ? 'upload' : base;
}
