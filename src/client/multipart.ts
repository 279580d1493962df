/**
 * A small streaming `multipart/form-data` encoder for `upload`: the file is read chunk by chunk
 * from its source and never held in memory whole. The body is single-use, so uploads are never
 * retried.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, posix } from 'node:path';
import { Readable } from 'node:stream';
import { InvalidRequestError } from './errors.js';

/** What `upload` can send: a local file path, bytes, a Blob/File, or a Node or web stream. */
export type UploadSource = string | Uint8Array | Blob | Readable | ReadableStream<Uint8Array>;

export interface UploadFile {
  source: UploadSource;
  filename: string;
  mediaType: string;
}

const isSource = (v: unknown): v is UploadSource =>
  typeof v === 'string' ||
  v instanceof Uint8Array ||
  v instanceof Blob ||
  v instanceof ReadableStream ||
  v instanceof Readable;

/**
 * Checks the file part before anything is sent: the source kind, that a path names a readable
 * regular file, and that the media type cannot inject a header.
 */
export async function prepareFile(
  operation: string,
  source: unknown,
  destination: string,
  filename: string | undefined,
  mediaType: string | undefined,
): Promise<UploadFile> {
  const fail = (field: string, msg: string, cause?: unknown): never => {
    throw new InvalidRequestError(operation, [{ loc: ['body', field], msg, type: 'value_error' }], {
      cause,
    });
  };
  if (!isSource(source)) {
    return fail('file', 'Expected a file path, Uint8Array, Blob, Readable or ReadableStream');
  }
  if (typeof source === 'string') {
    const info = await stat(source).catch((err: unknown) =>
      fail('file', `Cannot read ${source}: ${(err as Error).message}`, err),
    );
    if (!info.isFile()) fail('file', `${source} is not a regular file`);
  }
  const type = mediaType ?? (source instanceof Blob && source.type ? source.type : undefined);
  if (type !== undefined && /[\r\n]/.test(type)) fail('mediaType', 'Must not contain CR or LF');
  return {
    source,
    filename:
      filename ??
      (typeof source === 'string' ? basename(source) : undefined) ??
      (source instanceof File ? source.name : undefined) ??
      (posix.basename(destination) || 'upload'),
    mediaType: type ?? 'application/octet-stream',
  };
}

async function* webChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

async function* chunks(source: UploadSource): AsyncGenerator<Uint8Array> {
  if (source instanceof Uint8Array) yield source;
  else if (source instanceof Blob) yield* webChunks(source.stream());
  else if (source instanceof ReadableStream) yield* webChunks(source);
  else {
    const stream = typeof source === 'string' ? createReadStream(source) : source;
    for await (const chunk of stream) {
      yield typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Uint8Array);
    }
  }
}

/** Quotes a filename as browsers do in `Content-Disposition`. */
const quote = (name: string) => name.replace(/["\r\n]/g, encodeURIComponent);

/** A single-use multipart body: the text `fields` first, then the file part named `file`. */
export function multipartBody(
  fields: Record<string, string>,
  file: UploadFile,
): { contentType: string; body: Readable } {
  const boundary = `burrow-${randomBytes(16).toString('hex')}`;
  async function* parts(): AsyncGenerator<Uint8Array> {
    for (const [name, value] of Object.entries(fields)) {
      yield Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
      );
    }
    yield Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${quote(file.filename)}"\r\n` +
        `Content-Type: ${file.mediaType}\r\n\r\n`,
    );
    for await (const chunk of chunks(file.source)) {
      // An empty chunk would end a chunked transfer early.
      if (chunk.byteLength > 0) yield chunk;
    }
    yield Buffer.from(`\r\n--${boundary}--\r\n`);
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, body: Readable.from(parts()) };
}
