/**
 * Uploads: the multipart file stream goes to a temp file in the destination directory, is fsynced
 * and renamed into place. On any error, or a stream cut short by the route's size limit
 * (`truncated`), the temp file is removed and the error (413 for size) thrown: nothing
 * half-written is left.
 */
import { createWriteStream } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { dirname, posix } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { UploadResult } from '../../api/index.js';
import { HttpError, badRequest } from '../errors.js';
import { toolMessage } from './edit.js';
import { mkdirInside, tempPath } from './fsops.js';
import { ToolError, type SandboxView } from './paths.js';

/**
 * Store `file` at `path` (relative to home). A `path` ending in `/`, or naming an existing
 * directory, receives the file under its own (base)name; otherwise `path` is the file's path.
 */
export async function upload(
  view: SandboxView,
  path: string,
  filename: string,
  mediaType: string | undefined,
  file: Readable,
  maxBytes: number,
): Promise<UploadResult> {
  const name = safeName(filename);
  let target;
  try {
    const r = await view.resolve(path);
    const intoDir = path.endsWith('/') || r.stat?.isDirectory();
    target = await view.resolveWritable(intoDir ? posix.join(r.path, name) : r.path);
    if (target.stat?.isDirectory()) throw new ToolError(`${target.display} is a directory`);
    await mkdirInside(view, target, dirname(target.host));
  } catch (err) {
    file.resume(); // let the request finish; the route answers with the error
    throw badRequest(toolMessage(err, view.display(path)));
  }
  const tmp = tempPath(target.host);
  // a multipart size limit ends the stream early, marked `truncated` (busboy) after a 'limit'
  let limited = false;
  file.once('limit', () => (limited = true));
  const tooLarge = () => new HttpError(413, `Upload larger than ${maxBytes} bytes`);
  let size = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > maxBytes) done(tooLarge());
      else done(null, chunk);
    },
  });
  try {
    await pipeline(
      file,
      limit,
      createWriteStream(tmp, {
        flags: 'wx',
        mode: target.stat ? target.stat.mode & 0o7777 : 0o644,
      }),
    );
    if (limited || (file as Readable & { truncated?: boolean }).truncated) throw tooLarge();
    const fh = await open(tmp, 'r+');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await view.verify(target);
    await rename(tmp, target.host);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  const result: UploadResult = { filename: name, path: target.path };
  if (mediaType !== undefined) result.media_type = mediaType;
  return result;
}

function safeName(filename: string): string {
  const base = posix.basename(filename.replaceAll('\\', '/').replaceAll('\0', ''));
  return base === '' || base === '.' || base === '..' ? 'upload' : base;
}
