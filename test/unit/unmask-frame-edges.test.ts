/**
 * The relay's frame reader (src/server/chromium/unmask.ts) at two edges its other tests do not
 * reach: a long payload that starts at an odd offset of a socket read (the key's phase carried
 * from one read to the next, whatever offset the assembled part ends at), and a message sent in
 * pieces whose last piece is empty (what the message held is given back on that piece's header,
 * there being no payload byte whose arrival would end it).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { frameReader, PIECE_CHARGE } from '../../src/server/chromium/unmask.js';

const MiB = 1024 * 1024;

/** A masked client frame: `first` is its first byte (FIN and opcode). */
function frame(payload: Buffer, first = 0x82): Buffer {
  const key = randomBytes(4);
  const n = payload.length;
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(n));
  const head =
    n < 126
      ? Buffer.from([first, 0x80 | n])
      : Buffer.concat([Buffer.from([first, 0x80 | 127]), len]);
  const masked = Buffer.from(payload.map((b, i) => b ^ key[i % 4]!));
  return Buffer.concat([head, key, masked]);
}

const b1 = () => Buffer.from([0x7b]);

describe('frameReader', () => {
  it('assembles a long payload that starts at an odd offset of a read', () => {
    for (const before of [1, 2, 3]) {
      const payload = randomBytes(MiB + 3);
      // a short frame of 6 + `before` bytes, then the long frame's 14-byte header
      const wire = Buffer.concat([frame(randomBytes(before)), frame(payload)]);
      const reader = frameReader(8 * MiB);
      const out: Buffer[] = [];
      for (let i = 0; i < wire.length; i += 65_536) {
        out.push(...reader.read(Buffer.from(wire.subarray(i, i + 65_536))));
      }
      const whole = out.filter((b) => b.length === payload.length);
      expect(whole, `${before}`).toHaveLength(1);
      expect(whole[0]!.equals(payload), `${before}`).toBe(true);
    }
  });

  it("gives back a message's charge on the header of its empty last piece", () => {
    const asked: string[] = [];
    const reader = frameReader(8 * MiB, {
      admit: (bytes) => (asked.push(`admit ${bytes}`), true),
      done: (bytes) => asked.push(`done ${bytes}`),
    });
    reader.read(frame(randomBytes(300), 0x01)); // text, not the last piece
    expect(asked).toEqual([`admit ${PIECE_CHARGE}`]);
    reader.read(frame(Buffer.alloc(0), 0x80)); // continuation, the last, empty
    expect(asked).toEqual([`admit ${PIECE_CHARGE}`, `done ${PIECE_CHARGE}`]);
  });

  it('hands a short piece of a message on in a buffer of its own, not a view of its read', () => {
    const reader = frameReader(8 * MiB);
    // 63 KiB of pongs, then a 1-byte first piece of a text message, in one read
    const pong = frame(Buffer.alloc(125, 0x70), 0x8a);
    const read = Buffer.concat([...Array.from({ length: 500 }, () => pong), frame(b1(), 0x01)]);
    const out = reader.read(read);
    const payload = out.at(-1)!;
    expect(payload.length).toBe(1);
    expect(payload.buffer.byteLength).toBe(1); // `ws` keeps it, and only it, until the last piece
    expect(payload[0]).toBe(0x7b);
    // what came before it passed as it came
    expect(Buffer.concat(out.slice(0, -1)).length).toBe(read.length - 1);
  });
});
