/**
 * `POST /v1/instance/{id}/upload`: the one operation whose body is multipart. The file part is
 * streamed to the instance as it arrives when `path` came before it, and spooled first when
 * `path` comes after it: on the instance's own disk (where only the server reaches it), so that
 * it counts against the instance's disk quota like the file it becomes. A malformed body answers 4xx (see
 * `multipartError`) and leaves no spool file behind.
 */
import { createReadStream } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Multipart } from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { UploadFields, type UploadResult, type ValidationErrorItem } from '../../api/index.js';
import { HttpError, serverError } from '../errors.js';
import type { Registry } from '../instances/registry.js';
import { parseInput, RequestInvalid } from './request-body.js';

/** Limits of the multipart parser: one file, a few small fields. */
export const MULTIPART_LIMITS = {
  files: 1,
  fields: 10,
  parts: 12,
  headerPairs: 32,
  fieldSize: 64 * 1024,
};

/**
 * A failure of the multipart body itself (truncated, no boundary, garbage, over a limit) as the
 * 4xx it answers; the connection closes, since the rest of the body was not read.
 */
function multipartError(err: unknown): unknown {
  if (err instanceof HttpError || err instanceof RequestInvalid) return err;
  const e = err as { code?: string; statusCode?: number; message?: string };
  if (e.code === 'FST_REQ_FILE_TOO_LARGE') return err; // the error handler names the limit
  if (
    e.code === 'FST_FILES_LIMIT' ||
    e.code === 'FST_PARTS_LIMIT' ||
    e.code === 'FST_FIELDS_LIMIT'
  ) {
    return serverError('multipart_too_many_parts', { fields: MULTIPART_LIMITS.fields });
  }
  return serverError('malformed_multipart', { reason: e.message ?? 'unreadable' });
}

export type UploadHandler = (input: {
  params: { instance_id: string };
  request: FastifyRequest;
}) => Promise<UploadResult>;

export function uploadHandler(registry: Registry): UploadHandler {
  return async ({ params, request: req }) => {
    const files = registry.capability(params.instance_id, 'files', 'upload');
    const rec = registry.get(params.instance_id);
    if (!req.isMultipart()) {
      throw new RequestInvalid([
        { loc: ['body', 'file'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'path'], msg: 'Field required', type: 'missing' },
      ]);
    }
    const fields: Record<string, string> = {};
    let spooled: { file: string; filename: string; mimetype: string } | undefined;
    let result: UploadResult | undefined;
    // the file part being read, and the first error its stream emitted
    let current: Readable | undefined;
    let partError: unknown;
    const parts = req.parts()[Symbol.asyncIterator]();
    const nextPart = async (): Promise<Multipart | undefined> => {
      try {
        const next = await parts.next();
        return next.done ? undefined : next.value;
      } catch (err) {
        throw multipartError(err);
      }
    };
    try {
      for (let part = await nextPart(); part; part = await nextPart()) {
        if (part.type === 'file') {
          current = part.file;
          part.file.once('error', (err) => (partError ??= err));
        }
        if (!part.fieldname) {
          if (part.type === 'file') part.file.resume();
          throw serverError('malformed_multipart', { reason: 'a part has no name' });
        }
        if (part.type === 'field') {
          if (part.valueTruncated || part.fieldnameTruncated) {
            throw serverError('multipart_field_too_long', { limit: MULTIPART_LIMITS.fieldSize });
          }
          if (typeof part.value === 'string') fields[part.fieldname] = part.value;
          continue;
        }
        if (part.fieldname !== 'file' || result !== undefined || spooled) {
          part.file.resume();
          continue;
        }
        if (fields.path !== undefined) {
          const { path } = parseInput(UploadFields, fields, 'body');
          result = await files.upload(path, part.filename, part.mimetype, part.file);
        } else {
          // on the instance's disk where it has one: the wait counts against its quota
          const file = join(
            files.spoolDir?.() ?? rec.dir,
            `.upload-spool-${Date.now()}-${Math.random().toString(16).slice(2)}`,
          );
          spooled = { file, filename: part.filename, mimetype: part.mimetype };
          try {
            // opened before the body is read: a write stream that opened its file itself could
            // still be opening it when a broken body fails the pipeline, and would then make the
            // file after the removal below had looked for it (a spool file left for good)
            const handle = await open(file, 'wx', 0o600);
            await pipeline(part.file, handle.createWriteStream());
          } catch (err) {
            const code = (err as NodeJS.ErrnoException).code;
            if (code === 'ENOSPC' || code === 'EDQUOT') {
              part.file.resume(); // let the request finish; the answer names the full disk
              throw serverError('disk_full', { reason: (err as Error).message });
            }
            throw err;
          }
        }
      }
      if (result === undefined) {
        const missing: ValidationErrorItem[] = [];
        if (!spooled)
          missing.push({ loc: ['body', 'file'], msg: 'Field required', type: 'missing' });
        if (fields.path === undefined)
          missing.push({ loc: ['body', 'path'], msg: 'Field required', type: 'missing' });
        if (missing.length > 0) throw new RequestInvalid(missing);
        const { path } = parseInput(UploadFields, fields, 'body');
        const s = spooled!;
        const stream: Readable = createReadStream(s.file);
        result = await files.upload(path, s.filename, s.mimetype, stream);
      }
      return result;
    } catch (err) {
      // a part's stream failing on its own (not from a write of ours) is the body's fault
      const fromBody =
        err !== undefined &&
        (err === partError || err === current?.errored) &&
        !(err as { syscall?: string }).syscall;
      throw fromBody ? multipartError(err) : err;
    } finally {
      if (spooled) await rm(spooled.file, { force: true });
    }
  };
}
