/**
 * The toolbox's wire format (toolbox.py's docstring is the reference): a frame is a 4-byte
 * big-endian length N, N bytes of UTF-8 JSON header, then `header.payload_bytes` bytes of binary payload.
 * Payloads carry file contents as they are, so neither side base64-encodes or re-parses them.
 */
import { parseBounded } from '../../internal/json-bounded.js';

/**
 * Headers larger than this are refused (they hold paths and listings, never file contents);
 * toolbox.py answers TOO_LARGE rather than send one. A header is decoded on the server's main
 * thread in one go, so this and the containers below bound that to a few milliseconds: the
 * toolbox cuts a listing to 10,000 entries and 1 MiB of names (toolbox_ops.py `MAX_LIST_*`).
 * At 16 MiB and 1,000,000, a directory of 990,000 entries held `/livez` 5.8 s.
 */
export const MAX_HEADER_BYTES = 2 * 1024 * 1024;
/** Objects and arrays a header may hold (a listing of 10,000 `[name, dir]` entries fits). */
const MAX_HEADER_CONTAINERS = 20_000;
/** Payloads larger than this are refused: the largest read any tool asks for (64 MiB). */
export const MAX_PAYLOAD_BYTES = 64 * 1024 * 1024;

/** The stream broke the framing or its bounds: the peer that sent it is not to be trusted. */
export class FrameError extends Error {
  override name = 'FrameError';
}

export type FrameHeader = Record<string, unknown>;

export interface Frame {
  header: FrameHeader;
  payload: Buffer;
}

/** The buffers of one frame, in order (the payload is not copied). */
export function encodeFrame(header: FrameHeader, payload?: Uint8Array): Buffer[] {
  const json = Buffer.from(
    JSON.stringify({ ...header, payload_bytes: payload?.length ?? 0 }),
    'utf8',
  );
  const length = Buffer.alloc(4);
  length.writeUInt32BE(json.length);
  if (!payload || payload.length === 0) return [length, json];
  return [length, json, Buffer.from(payload.buffer, payload.byteOffset, payload.length)];
}

/**
 * Reassembles frames from a byte stream cut anywhere. Holds at most one frame's bytes within the
 * bounds (and the chunk that completes it): a declared length past them throws at once.
 */
export class FrameDecoder {
  #chunks: Buffer[] = [];
  #buffered = 0;
  #header: FrameHeader | undefined;
  #payloadSize = 0;

  /** Feed bytes; returns the frames they complete. Throws `FrameError` on a malformed stream. */
  push(chunk: Buffer): Frame[] {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.#header === undefined) {
        if (this.#buffered < 4) break;
        const size = this.#peek(4).readUInt32BE(0);
        if (size > MAX_HEADER_BYTES) {
          throw new FrameError(`frame header of ${size} bytes (at most ${MAX_HEADER_BYTES})`);
        }
        if (this.#buffered < 4 + size) break;
        this.#take(4);
        let header: unknown;
        try {
          header = parseBounded(this.#take(size).toString('utf8'), MAX_HEADER_CONTAINERS);
        } catch {
          throw new FrameError('frame header is not JSON');
        }
        if (typeof header !== 'object' || header === null || Array.isArray(header))
          throw new FrameError('frame header is not an object');
        const given = (header as FrameHeader).payload_bytes;
        const declared = given === undefined ? 0 : given;
        if (!Number.isSafeInteger(declared) || (declared as number) < 0) {
          throw new FrameError('frame payload_bytes is not a byte count');
        }
        if ((declared as number) > MAX_PAYLOAD_BYTES) {
          throw new FrameError(`frame payload of ${declared} bytes (at most ${MAX_PAYLOAD_BYTES})`);
        }
        this.#header = header as FrameHeader;
        this.#payloadSize = declared as number;
      }
      if (this.#buffered < this.#payloadSize) break;
      frames.push({ header: this.#header, payload: this.#take(this.#payloadSize) });
      this.#header = undefined;
      this.#payloadSize = 0;
    }
    return frames;
  }

  /** The first `n` buffered bytes without consuming them. */
  #peek(n: number): Buffer {
    const first = this.#chunks[0]!;
    if (first.length >= n) return first.subarray(0, n);
    const joined = Buffer.concat(this.#chunks);
    this.#chunks = [joined];
    return joined.subarray(0, n);
  }

  /** Consume the first `n` buffered bytes (one concatenation per frame part at most). */
  #take(n: number): Buffer {
    this.#buffered -= n;
    if (n === 0) return Buffer.alloc(0);
    const first = this.#chunks[0]!;
    if (first.length > n) {
      this.#chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    if (first.length === n) {
      this.#chunks.shift();
      return first;
    }
    const parts: Buffer[] = [];
    let left = n;
    while (left > 0) {
      const c = this.#chunks[0]!;
      if (c.length <= left) {
        parts.push(c);
        this.#chunks.shift();
        left -= c.length;
      } else {
        parts.push(c.subarray(0, left));
        this.#chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    return Buffer.concat(parts, n);
  }
}
