/**
 * A profile's entries sealed and opened again as streams: packed (pack.ts), deflated, then
 * encrypted with AES-256-GCM, and back. A profile may be hundreds of MB before deflating: done
 * in one call on the main thread (`deflateRawSync`, one `Buffer.concat` of the whole archive), a
 * save stalled every other client of the server for seconds. Here zlib works in libuv's thread
 * pool a megabyte at a time, the cipher takes each deflated megabyte as it comes, and nothing is
 * copied whole: the main thread only moves chunks between them. The bytes are the same as the
 * one-call version's (a raw deflate stream, the cipher over all of it), so profiles saved by either
 * open with the other.
 */
import { createCipheriv, createDecipheriv, type CipherGCM, type DecipherGCM } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createDeflateRaw, createInflateRaw } from 'node:zlib';
import type { ProfileEntry } from '../instances/runtime.js';
import { packParts, Unpacker } from './pack.js';

/** Bytes zlib hands back per trip to the thread pool, and the cipher takes at once. */
const CHUNK = 2 ** 20;

type Consumer = (chunks: AsyncIterable<Buffer>) => Promise<void>;

/**
 * `run`'s pipeline ending in `consume`: an error `consume` throws is the one rejected with (the
 * pipeline itself reports it as the abort of the streams before it).
 */
async function pipeTo(run: (dest: Consumer) => Promise<void>, consume: Consumer): Promise<void> {
  let own: { err: unknown } | undefined;
  try {
    await run(async (chunks) => {
      try {
        await consume(chunks);
      } catch (err) {
        own = { err };
        throw err;
      }
    });
  } catch (err) {
    throw own ? own.err : err;
  }
}

/** The slices of `buf` of `CHUNK` bytes, without copying. */
function* slices(buf: Buffer): Generator<Buffer> {
  for (let at = 0; at < buf.length; at += CHUNK) yield buf.subarray(at, at + CHUNK);
}

export interface Sealed {
  /** The ciphertext, in pieces. */
  readonly parts: Buffer[];
  readonly bytes: number;
  readonly tag: Buffer;
}

/**
 * `entries` packed, deflated and encrypted under `key` and `iv` with `aad`; throws `tooBig()`'s
 * error as soon as the ciphertext passes `maxBytes` (the rest is not deflated).
 */
export async function seal(
  entries: readonly ProfileEntry[],
  cipherKey: { key: Buffer; iv: Buffer; aad: Buffer },
  maxBytes: number,
  tooBig: () => Error,
): Promise<Sealed> {
  const cipher = createCipheriv('aes-256-gcm', cipherKey.key, cipherKey.iv) as CipherGCM;
  cipher.setAAD(cipherKey.aad);
  const parts: Buffer[] = [];
  let bytes = 0;
  const keep = (b: Buffer) => {
    bytes += b.length;
    if (bytes > maxBytes) throw tooBig();
    if (b.length > 0) parts.push(b);
  };
  await pipeTo(
    (dest) =>
      pipeline(Readable.from(packParts(entries)), createDeflateRaw({ chunkSize: CHUNK }), dest),
    async (deflated) => {
      for await (const chunk of deflated) keep(cipher.update(chunk));
      keep(cipher.final());
    },
  );
  return { parts, bytes, tag: cipher.getAuthTag() };
}

/**
 * The entries of a sealed body (the bytes after the header line), decrypted and inflated as they
 * come; throws when they do not authenticate, do not inflate, are malformed or pass `maxBytes`
 * unpacked. Nothing is returned before the tag is checked.
 */
export async function unseal(
  body: Buffer,
  cipherKey: { key: Buffer; iv: Buffer; aad: Buffer; tag: Buffer },
  maxBytes: number,
): Promise<ProfileEntry[]> {
  const decipher = createDecipheriv('aes-256-gcm', cipherKey.key, cipherKey.iv) as DecipherGCM;
  decipher.setAAD(cipherKey.aad);
  decipher.setAuthTag(cipherKey.tag);
  const unpacker = new Unpacker(maxBytes);
  await pipeTo(
    (dest) =>
      pipeline(Readable.from(slices(body)), decipher, createInflateRaw({ chunkSize: CHUNK }), dest),
    async (inflated) => {
      for await (const chunk of inflated) unpacker.push(chunk);
    },
  );
  return unpacker.end();
}
