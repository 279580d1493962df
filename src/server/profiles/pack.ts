/**
 * A profile's entries as one stream of bytes, the plaintext a saved profile deflates and seals
 * (store.ts): per entry a kind byte (1 a file, 2 a directory), the path's length and the data's
 * (u32 little-endian), the path's bytes, the data's. Written as parts that point at the entries'
 * own buffers, and read back chunk by chunk as the inflater gives them: a profile of hundreds of MB
 * is never copied whole into one buffer on the server's main thread, on either side.
 */
import type { ProfileEntry } from '../instances/runtime.js';

/** The length of `entries`' packed stream: what `Unpacker` takes in to read them back. */
export function packedLength(entries: readonly ProfileEntry[]): number {
  let n = 0;
  for (const e of entries) n += 9 + Buffer.byteLength(e.path) + (e.data?.length ?? 0);
  return n;
}

/** `entries` as the parts of the packed stream, in order; file data is not copied. */
export function* packParts(entries: readonly ProfileEntry[]): Generator<Buffer> {
  for (const e of entries) {
    const path = Buffer.from(e.path);
    const head = Buffer.alloc(9);
    head.writeUInt8(e.data ? 1 : 2, 0);
    head.writeUInt32LE(path.length, 1);
    head.writeUInt32LE(e.data?.length ?? 0, 5);
    yield Buffer.concat([head, path]);
    if (e.data && e.data.length > 0) yield e.data;
  }
}

/**
 * The packed stream undone as its chunks arrive, each path checked to stay inside the profile;
 * throws on anything malformed, or once more than `maxBytes` arrived.
 */
export class Unpacker {
  readonly #maxBytes: number;
  readonly #entries: ProfileEntry[] = [];
  #received = 0;
  /** Bytes of the stream read into entries so far. */
  #consumed = 0;
  readonly #head = Buffer.alloc(9);
  #headAt = 0;
  /** The entry being read, once its head is complete. */
  #cur: { kind: number; path: Buffer; pathAt: number; data: Buffer; dataAt: number } | undefined;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  push(chunk: Buffer): void {
    this.#received += chunk.length;
    if (this.#received > this.#maxBytes) throw new Error(`more than ${this.#maxBytes} bytes`);
    let at = 0;
    while (at < chunk.length) {
      const cur = this.#cur;
      if (!cur) {
        const n = chunk.copy(this.#head, this.#headAt, at, at + 9 - this.#headAt);
        at += n;
        this.#consumed += n;
        this.#headAt += n;
        if (this.#headAt === 9) this.#begin();
        continue;
      }
      if (cur.pathAt < cur.path.length) {
        const n = chunk.copy(cur.path, cur.pathAt, at, at + cur.path.length - cur.pathAt);
        at += n;
        this.#consumed += n;
        cur.pathAt += n;
      } else {
        const n = chunk.copy(cur.data, cur.dataAt, at, at + cur.data.length - cur.dataAt);
        at += n;
        this.#consumed += n;
        cur.dataAt += n;
      }
      this.#complete();
    }
  }

  /** The entries, once the stream has ended; throws if it ended inside an entry. */
  end(): ProfileEntry[] {
    if (this.#cur || this.#headAt > 0) throw new Error('truncated entry');
    return this.#entries;
  }

  #begin(): void {
    this.#headAt = 0;
    const kind = this.#head.readUInt8(0);
    const pathLen = this.#head.readUInt32LE(1);
    const size = this.#head.readUInt32LE(5);
    // no more is allocated than the stream may still hold
    if ((kind !== 1 && kind !== 2) || this.#consumed + pathLen + size > this.#maxBytes) {
      throw new Error('malformed entry');
    }
    const data = Buffer.allocUnsafe(size);
    this.#cur = { kind, path: Buffer.alloc(pathLen), pathAt: 0, data, dataAt: 0 };
    this.#complete();
  }

  /** The current entry kept once its path and data are whole. */
  #complete(): void {
    const cur = this.#cur!;
    if (cur.pathAt < cur.path.length || cur.dataAt < cur.data.length) return;
    this.#cur = undefined;
    const path = cur.path.toString('utf8');
    const parts = path.split('/');
    if (path.startsWith('/') || parts.some((p) => p === '' || p === '.' || p === '..')) {
      throw new Error(`entry ${JSON.stringify(path)} leaves the profile`);
    }
    this.#entries.push(cur.kind === 1 ? { path, data: cur.data } : { path });
  }
}
