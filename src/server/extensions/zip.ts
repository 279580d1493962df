/**
 * A small reader of zip archives held in memory, enough for an unpacked browser extension: stored
 * and deflated entries, no encryption, no multi-disk, no zip64. It refuses what could write outside
 * the target directory (absolute names, `..`, backslashes, drive letters), links and device files
 * by their Unix mode, duplicate names, and more bytes unpacked than the caller allows (checked
 * against the sizes the archive claims and again against what inflating really gives). Names are
 * bounded too (`MAX_ENTRY_DEPTH`, `MAX_NAME_BYTES`, `MAX_ENTRY_BYTES`): unpacked under a host
 * directory and copied again under each instance's home, a deeper or longer one would be stored
 * and then fail every copy for want of a path the kernel takes (`PATH_MAX`, 4096 bytes).
 */
import { promisify } from 'node:util';
import { inflateRaw } from 'node:zlib';

export interface ZipEntry {
  /** Relative path with `/` separators, never empty, no `.` or `..` segment. */
  readonly name: string;
  readonly directory: boolean;
  /**
   * Unpacked bytes (files only), inflated in libuv's thread pool: an entry of tens of MB
   * inflated on the main thread stalled every other client of the server for 100-300 ms.
   */
  read(): Promise<Buffer>;
}

const inflate = promisify(inflateRaw);

/** Why an archive was refused; the message names the problem for the API's answer. */
export class ZipError extends Error {}

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
/** The end-of-central-directory record is 22 bytes plus a comment of at most 65 535. */
const EOCD_MIN = 22;
const MAX_COMMENT = 0xffff;

/** Most components an entry's path may have, its file included (`a/b/c.js` has 3). */
export const MAX_ENTRY_DEPTH = 64;
/** Longest component of an entry's path, in UTF-8 bytes (Linux's `NAME_MAX`). */
export const MAX_NAME_BYTES = 255;
/**
 * Longest entry path, in UTF-8 bytes: a quarter of `PATH_MAX`, which leaves the rest for where
 * the server and each instance keep the copy.
 */
export const MAX_ENTRY_BYTES = 1024;

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;

function findEnd(buf: Buffer): number {
  const stop = Math.max(0, buf.length - EOCD_MIN - MAX_COMMENT);
  for (let at = buf.length - EOCD_MIN; at >= stop; at--) {
    if (buf.readUInt32LE(at) === EOCD_SIGNATURE) return at;
  }
  throw new ZipError('not a zip archive (no end of central directory)');
}

/** `name` checked as a relative path; throws for anything that would leave the target. */
export function safeEntryName(raw: string): string {
  if (raw.includes('\\')) throw new ZipError(`entry ${JSON.stringify(raw)} has a backslash`);
  if (raw.includes('\0')) throw new ZipError('an entry name has a NUL byte');
  if (raw.startsWith('/') || /^[a-zA-Z]:/.test(raw)) {
    throw new ZipError(`entry ${JSON.stringify(raw)} is an absolute path`);
  }
  const parts = raw.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new ZipError(`entry ${JSON.stringify(raw)} leaves its folder`);
  if (parts.length === 0) throw new ZipError(`entry ${JSON.stringify(raw)} has no name`);
  const name = parts.join('/');
  // named by its start only: a refused name may be as long as a zip allows (64 KiB)
  const shown = JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
  if (parts.length > MAX_ENTRY_DEPTH) {
    throw new ZipError(
      `entry ${shown} is ${parts.length} levels deep, more than ${MAX_ENTRY_DEPTH}`,
    );
  }
  if (parts.some((p) => Buffer.byteLength(p) > MAX_NAME_BYTES)) {
    throw new ZipError(`entry ${shown} has a name longer than ${MAX_NAME_BYTES} bytes`);
  }
  if (Buffer.byteLength(name) > MAX_ENTRY_BYTES) {
    throw new ZipError(`entry ${shown} has a path longer than ${MAX_ENTRY_BYTES} bytes`);
  }
  return name;
}

/**
 * The entries of the archive in `buf`, checked; `maxBytes` bounds the sum of unpacked sizes and
 * `maxEntries` their number.
 */
export function readZip(buf: Buffer, limits: { maxBytes: number; maxEntries: number }): ZipEntry[] {
  if (buf.length < EOCD_MIN) throw new ZipError('not a zip archive (too short)');
  const end = findEnd(buf);
  const count = buf.readUInt16LE(end + 10);
  const dirSize = buf.readUInt32LE(end + 12);
  const dirStart = buf.readUInt32LE(end + 16);
  if (count === 0xffff || dirStart === 0xffffffff)
    throw new ZipError('zip64 archives are not read');
  if (dirStart + dirSize > end) throw new ZipError('the central directory lies outside the file');
  if (count > limits.maxEntries) {
    throw new ZipError(`${count} entries, more than the ${limits.maxEntries} allowed`);
  }
  const entries: ZipEntry[] = [];
  const names = new Set<string>();
  let total = 0;
  let at = dirStart;
  for (let i = 0; i < count; i++) {
    if (at + 46 > end || buf.readUInt32LE(at) !== CENTRAL_SIGNATURE) {
      throw new ZipError('the central directory is damaged');
    }
    const flags = buf.readUInt16LE(at + 8);
    const method = buf.readUInt16LE(at + 10);
    const packed = buf.readUInt32LE(at + 20);
    const size = buf.readUInt32LE(at + 24);
    const nameLen = buf.readUInt16LE(at + 28);
    const extraLen = buf.readUInt16LE(at + 30);
    const commentLen = buf.readUInt16LE(at + 32);
    const madeBy = buf.readUInt16LE(at + 4) >> 8;
    const external = buf.readUInt32LE(at + 38);
    const local = buf.readUInt32LE(at + 42);
    const rawName = buf.toString('utf8', at + 46, at + 46 + nameLen);
    at += 46 + nameLen + extraLen + commentLen;

    const name = safeEntryName(rawName);
    if (flags & 0x1) throw new ZipError(`entry ${JSON.stringify(name)} is encrypted`);
    // Unix archivers keep the mode in the high half of the external attributes
    const mode = madeBy === 3 ? external >>> 16 : 0;
    const type = mode & S_IFMT;
    const directory = rawName.endsWith('/') || type === S_IFDIR;
    if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) {
      throw new ZipError(`entry ${JSON.stringify(name)} is a link or special file`);
    }
    if (names.has(name)) throw new ZipError(`entry ${JSON.stringify(name)} appears twice`);
    names.add(name);
    if (directory) {
      entries.push({ name, directory, read: async () => Buffer.alloc(0) });
      continue;
    }
    if (method !== 0 && method !== 8) {
      throw new ZipError(`entry ${JSON.stringify(name)} uses compression method ${method}`);
    }
    total += size;
    if (total > limits.maxBytes) {
      throw new ZipError(`unpacked it is larger than ${limits.maxBytes} bytes`);
    }
    if (local + 30 > buf.length || buf.readUInt32LE(local) !== LOCAL_SIGNATURE) {
      throw new ZipError(`entry ${JSON.stringify(name)} has no local header`);
    }
    const dataStart = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    if (dataStart + packed > buf.length) {
      throw new ZipError(`entry ${JSON.stringify(name)} is truncated`);
    }
    const data = buf.subarray(dataStart, dataStart + packed);
    entries.push({
      name,
      directory,
      read: async () => {
        let out: Buffer;
        try {
          // the claimed size bounds what inflating may give (a bomb stops at it)
          out = method === 0 ? data : await inflate(data, { maxOutputLength: Math.max(1, size) });
        } catch {
          throw new ZipError(`entry ${JSON.stringify(name)} does not inflate`);
        }
        if (out.length !== size) {
          throw new ZipError(`entry ${JSON.stringify(name)} is not the size its header says`);
        }
        return out;
      },
    });
  }
  return entries;
}
