/**
 * A relay client's frames unmasked as their bytes arrive, not in one pass when a frame is whole.
 *
 * Every frame a WebSocket client sends is masked (RFC 6455 §5.3). `ws`, without its optional
 * native `bufferutil` (burrow does not ship it), unmasks a frame in one JavaScript loop over its
 * bytes once all of them have arrived: a `cdp_url` client's 96 MiB frame held the main thread
 * 0.5–1.4 s on a loaded machine, and a client sending such frames without pause stalled every
 * other client of the server for as long (issue 35). Here each chunk the socket reads is unmasked
 * in place, a word at a time, before `ws` sees it, and each frame's masking key is overwritten
 * with zeros, which `ws` then skips: the same work, in slices of one socket read.
 *
 * The frame header is read only as far as needed to follow the frames (lengths and key); `ws`
 * still reads and checks everything itself (opcodes, lengths against `maxPayload`, UTF-8). A
 * frame longer than `maxPayload` is left as it is: `ws` closes the connection (1009) on its
 * header.
 */
import { endianness } from 'node:os';
import type { Duplex } from 'node:stream';

const LITTLE_ENDIAN = endianness() === 'LE';

/**
 * Unmasks `buf[start, end)` in place with `key`, whose byte `phase` applies to `buf[start]`;
 * returns the phase for the byte after `end`.
 */
function unmask(buf: Buffer, start: number, end: number, key: Uint8Array, phase: number): number {
  let i = start;
  let p = phase;
  while (i < end && (!LITTLE_ENDIAN || (buf.byteOffset + i) % 4 !== 0)) {
    buf[i++]! ^= key[p]!;
    p = (p + 1) & 3;
  }
  const words = (end - i) >>> 2;
  if (words > 0) {
    const word =
      (key[p]! |
        (key[(p + 1) & 3]! << 8) |
        (key[(p + 2) & 3]! << 16) |
        (key[(p + 3) & 3]! << 24)) >>>
      0;
    const view = new Uint32Array(buf.buffer, buf.byteOffset + i, words);
    for (let w = 0; w < words; w++) view[w]! ^= word;
    i += words * 4;
  }
  while (i < end) {
    buf[i++]! ^= key[p]!;
    p = (p + 1) & 3;
  }
  return p;
}

/**
 * Unmasks the frames a client sends on `socket` as they arrive. Call right after `ws` took the
 * socket (`handleUpgrade`'s callback), before any data flowed: the listener goes before `ws`'s
 * own.
 */
export function unmaskAsReceived(socket: Duplex, maxPayload: number): void {
  /** Bytes of the current frame's header seen so far (up to 14). */
  const header = new Uint8Array(14);
  let headerSeen = 0;
  /** Where in the header the key starts, and the header's length, once known. */
  let keyAt = 0;
  let headerLength = 2;
  const key = new Uint8Array(4);
  /** Payload bytes of the current frame still to come, and the key's phase for the next one. */
  let payloadLeft = 0;
  let phase = 0;
  let givenUp = false;

  const onData = (chunk: Buffer) => {
    if (givenUp) return;
    let i = 0;
    while (i < chunk.length) {
      if (payloadLeft > 0) {
        const end = Math.min(chunk.length, i + payloadLeft);
        phase = unmask(chunk, i, end, key, phase);
        payloadLeft -= end - i;
        i = end;
        continue;
      }
      // a header byte
      const at = headerSeen++;
      header[at] = chunk[i]!;
      if (at >= keyAt && keyAt > 0 && at < keyAt + 4) {
        key[at - keyAt] = chunk[i]!;
        chunk[i] = 0; // ws skips a frame whose key is zero
      }
      i++;
      if (headerSeen === 2) {
        if ((header[1]! & 0x80) === 0) return giveUp(); // unmasked: ws closes it (1002)
        const len7 = header[1]! & 0x7f;
        keyAt = len7 === 126 ? 4 : len7 === 127 ? 10 : 2;
        headerLength = keyAt + 4;
      }
      if (headerSeen === headerLength) {
        const len7 = header[1]! & 0x7f;
        let length = len7;
        if (len7 === 126) length = (header[2]! << 8) | header[3]!;
        if (len7 === 127) {
          const high =
            ((header[2]! << 24) | (header[3]! << 16) | (header[4]! << 8) | header[5]!) >>> 0;
          const low =
            ((header[6]! << 24) | (header[7]! << 16) | (header[8]! << 8) | header[9]!) >>> 0;
          length = high * 2 ** 32 + low;
        }
        // past the cap ws closes the connection on this header: nothing more to follow
        if (length > maxPayload) return giveUp();
        payloadLeft = length;
        phase = 0;
        headerSeen = 0;
        keyAt = 0;
        headerLength = 2;
      }
    }
  };
  const giveUp = () => {
    givenUp = true;
    socket.removeListener('data', onData);
  };
  socket.prependListener('data', onData);
}
