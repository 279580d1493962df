/**
 * The relay's frame reader (src/server/chromium/unmask.ts) on its own: what it hands `ws` for
 * each chunk a socket read. Short payloads pass in place, unmasked, with the key zeroed; a
 * payload of 1 MiB or more comes out as one buffer of exactly its length once its last byte
 * came; a frame past the cap, or one not masked, is passed on as it came with all that follows.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { frameReader, PIECE_CHARGE } from '../../src/server/chromium/unmask.js';

const MiB = 1024 * 1024;

/** A masked client frame (binary, FIN) carrying `payload`, and its key. */
function frame(payload: Buffer, key = randomBytes(4)): Buffer {
  const n = payload.length;
  const head =
    n < 126
      ? Buffer.from([0x82, 0x80 | n])
      : n < 65536
        ? Buffer.from([0x82, 0x80 | 126, n >> 8, n & 0xff])
        : Buffer.concat([Buffer.from([0x82, 0x80 | 127, 0, 0, 0, 0]), u32(n)]);
  const masked = Buffer.from(payload.map((b, i) => b ^ key[i % 4]!));
  return Buffer.concat([head, key, masked]);
}
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
/** Feeds `wire` to a reader in chunks of `size`, returning every piece it handed on. */
function feed(wire: Buffer, size: number, max = 8 * MiB): Buffer[] {
  const reader = frameReader(max);
  const out: Buffer[] = [];
  for (let i = 0; i < wire.length; i += size)
    out.push(...reader.read(Buffer.from(wire.subarray(i, i + size))));
  return out;
}

describe('frameReader', () => {
  it('passes a short frame on unmasked, its key zeroed, whatever the chunking', () => {
    const payload = randomBytes(300);
    for (const size of [1, 7, 1000]) {
      const out = Buffer.concat(feed(frame(payload), size));
      expect(out.subarray(0, 4)).toEqual(Buffer.from([0x82, 0x80 | 126, 1, 44]));
      expect(out.subarray(4, 8)).toEqual(Buffer.alloc(4));
      expect(out.subarray(8).equals(payload)).toBe(true);
    }
  });

  it('hands a long payload over as one buffer of its length, only when whole', () => {
    const payload = randomBytes(MiB + 5);
    const wire = Buffer.concat([frame(randomBytes(10)), frame(payload), frame(randomBytes(3))]);
    const out = feed(wire, 65_537);
    const whole = out.filter((b) => b.length === payload.length);
    expect(whole).toHaveLength(1);
    expect(whole[0]!.equals(payload)).toBe(true);
    // nothing of the payload came before it: the pieces before it are the frames' headers only
    const before = out.slice(0, out.indexOf(whole[0]!));
    expect(Buffer.concat(before).length).toBe(2 + 4 + 10 + 10 + 4);
    expect(Buffer.concat(out).length).toBe(wire.length);
  });

  it('keeps a payload just under 1 MiB in the chunks it came in', () => {
    const payload = randomBytes(MiB - 1);
    const out = feed(frame(payload), 65_536);
    expect(out.every((b) => b.length <= 65_536)).toBe(true);
    expect(Buffer.concat(out).subarray(14).equals(payload)).toBe(true);
  });

  it('passes a frame past the cap, and all that follows, on as it came', () => {
    const wire = frame(randomBytes(2 * MiB));
    const out = Buffer.concat(feed(wire, 4096, MiB));
    // the key is zeroed before the length is known to be past the cap; the payload is untouched
    expect(out.subarray(0, 10)).toEqual(wire.subarray(0, 10));
    expect(out.subarray(14).equals(wire.subarray(14))).toBe(true);
  });

  it('passes an unmasked frame, and all that follows, on as it came', () => {
    const wire = Buffer.concat([Buffer.from([0x82, 3, 1, 2, 3]), frame(randomBytes(5))]);
    expect(Buffer.concat(feed(wire, 2)).equals(wire)).toBe(true);
  });

  it('asks its budget before it holds a long payload, keeps it while refused until admitted, says when it let it go', () => {
    const asked: string[] = [];
    let room = MiB + 5;
    const reader = frameReader(8 * MiB, {
      admit: (bytes) => {
        asked.push(`admit ${bytes}`);
        return bytes <= room;
      },
      done: (bytes) => asked.push(`done ${bytes}`),
    });
    const first = frame(randomBytes(MiB + 5));
    reader.read(Buffer.from(first.subarray(0, 100)));
    expect(asked).toEqual([`admit ${MiB + 5}`]);
    reader.read(Buffer.from(first.subarray(100)));
    expect(asked).toEqual([`admit ${MiB + 5}`, `done ${MiB + 5}`]);
    // refused: its header goes on, its payload and what follows wait, in order
    room = MiB;
    const payload = randomBytes(MiB + 1);
    const short = randomBytes(10);
    const wire = Buffer.concat([frame(payload), frame(short)]);
    expect(Buffer.concat(reader.read(Buffer.from(wire.subarray(0, 20)))).length).toBe(14);
    expect(reader.waiting).toBe(MiB + 1);
    expect(reader.read(Buffer.from(wire.subarray(20)))).toEqual([]);
    expect(reader.read(Buffer.from(wire.subarray(0, 0)))).toEqual([]);
    // the caller took the charge for it: it goes on, in order, without asking again
    const out = reader.admitted();
    expect(reader.waiting).toBe(0);
    expect(out[0]!.equals(payload)).toBe(true);
    expect(Buffer.concat(out.slice(1)).subarray(6).equals(short)).toBe(true);
    expect(asked.filter((a) => a === `admit ${MiB + 1}`)).toHaveLength(1);
    expect(asked.at(-1)).toBe(`done ${MiB + 1}`);
    expect(reader.admitted()).toEqual([]); // nothing waits any more
  });

  it('charges every piece of a message sent in pieces, short ones too, until its last is handed on', () => {
    const asked: string[] = [];
    const reader = frameReader(8 * MiB, {
      admit: (bytes) => (asked.push(`admit ${bytes}`), true),
      done: (bytes) => asked.push(`done ${bytes}`),
    });
    /** A masked frame with its FIN bit and opcode (text first, continuation after). */
    const piece = (payload: Buffer, opcode: number, fin: boolean) => {
      const f = frame(payload);
      f[0] = (fin ? 0x80 : 0) | opcode;
      return f;
    };
    reader.read(piece(randomBytes(300), 1, false));
    reader.read(piece(randomBytes(70_000), 0, false));
    // a ping between the pieces is charged nothing
    const ping = frame(randomBytes(4));
    ping[0] = 0x89;
    reader.read(ping);
    // a short piece is charged what keeping it costs at least (PIECE_CHARGE)
    expect(asked).toEqual([`admit ${PIECE_CHARGE}`, 'admit 70000']);
    reader.read(piece(randomBytes(5), 0, true));
    expect(asked).toEqual([
      `admit ${PIECE_CHARGE}`,
      'admit 70000',
      'admit 5',
      `done ${PIECE_CHARGE + 70_005}`,
    ]);
    // a whole message in one short frame is charged nothing
    reader.read(frame(randomBytes(100)));
    expect(asked).toHaveLength(4);
  });
});
