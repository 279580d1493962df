/**
 * burrow's extension routes for browser extensions: `POST /v1/extensions` reads its multipart
 * body's `file` part (a zip archive) into memory, bounded by the store's limit, and hands it to the
 * store (extensions/store.ts), which checks and unpacks it; list and delete are one call each.
 */
import type { FastifyRequest } from 'fastify';
import type { ExtensionInfo } from '../../api/index.js';
import { ExtensionInvalid, type ExtensionStore } from '../extensions/store.js';
import { HttpError, serverError } from '../errors.js';
import { MULTIPART_LIMITS } from './upload.js';
import { RequestInvalid } from './request-body.js';

export type ExtensionUploadHandler = (input: { request: FastifyRequest }) => Promise<ExtensionInfo>;

/** The archive of a multipart body, at most `limit` bytes; the errors name what is wrong. */
async function readArchive(
  req: FastifyRequest,
  limit: number,
): Promise<{ bytes: Buffer; filename: string | null }> {
  if (!req.isMultipart()) {
    throw new RequestInvalid([
      {
        loc: ['body', 'file'],
        msg: 'Field required (a multipart body with a zip archive)',
        type: 'missing',
      },
    ]);
  }
  let found: { bytes: Buffer; filename: string | null } | undefined;
  try {
    for await (const part of req.parts({ limits: { ...MULTIPART_LIMITS, fileSize: limit } })) {
      if (part.type !== 'file') continue;
      if (part.fieldname !== 'file' || found) {
        part.file.resume();
        continue;
      }
      const bytes = await part.toBuffer();
      found = { bytes, filename: part.filename || null };
    }
  } catch (err) {
    if (err instanceof HttpError || err instanceof RequestInvalid) throw err;
    const e = err as { code?: string; message?: string };
    if (e.code === 'FST_REQ_FILE_TOO_LARGE') throw serverError('extension_too_large', { limit });
    if (
      e.code === 'FST_FILES_LIMIT' ||
      e.code === 'FST_PARTS_LIMIT' ||
      e.code === 'FST_FIELDS_LIMIT'
    ) {
      throw serverError('multipart_too_many_parts', { fields: MULTIPART_LIMITS.fields });
    }
    throw serverError('malformed_multipart', { reason: e.message ?? 'unreadable' });
  }
  if (!found) {
    throw new RequestInvalid([{ loc: ['body', 'file'], msg: 'Field required', type: 'missing' }]);
  }
  return found;
}

export function extensionUploadHandler(store: ExtensionStore): ExtensionUploadHandler {
  return async ({ request }) => {
    const { bytes, filename } = await readArchive(request, store.maxBytes);
    try {
      return await store.add(bytes, filename);
    } catch (err) {
      if (!(err instanceof ExtensionInvalid)) throw err;
      throw new RequestInvalid([
        {
          loc: ['body', 'file'],
          msg: err.message,
          type: 'value_error',
          ctx: { error: err.reason },
        },
      ]);
    }
  };
}
