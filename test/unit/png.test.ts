/** The in-process PNG encoder: its output decoded by hand (chunks, an independent CRC-32, zlib). */
import { inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { encodePng, PNG_SIGNATURE } from '../../src/internal/png.js';

/** CRC-32 (ISO 3309, as PNG uses it), bit by bit: independent of the encoder's zlib.crc32. */
function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

interface Chunk {
  type: string;
  data: Buffer;
}

function chunks(png: Buffer): Chunk[] {
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 13, 10, 0x1a, 10]));
  const out: Chunk[] = [];
  for (let o = 8; o < png.length;) {
    const len = png.readUInt32BE(o);
    const type = png.toString('latin1', o + 4, o + 8);
    const data = png.subarray(o + 8, o + 8 + len);
    expect(png.readUInt32BE(o + 8 + len), `CRC of ${type}`).toBe(
      crc32(png.subarray(o + 4, o + 8 + len)),
    );
    out.push({ type, data });
    o += 12 + len;
  }
  return out;
}

/** Scanlines (filter 0) of a `w` × `h` image whose pixel (x, y) is `rgb(x, y)`. */
function scanlines(w: number, h: number, rgb: (x: number, y: number) => number[]): Buffer {
  const rows: number[] = [];
  for (let y = 0; y < h; y++) {
    rows.push(0);
    for (let x = 0; x < w; x++) rows.push(...rgb(x, y));
  }
  return Buffer.from(rows);
}

describe('encodePng', () => {
  it('writes signature, IHDR (8-bit RGB), one IDAT whose zlib stream is the scanlines, IEND', async () => {
    const w = 5;
    const h = 3;
    const lines = scanlines(w, h, (x, y) => [x * 50, y * 100, (x + y) % 256]);
    const png = await encodePng(w, h, lines);

    expect(png.subarray(0, 8)).toEqual(PNG_SIGNATURE);
    const [ihdr, idat, iend, ...rest] = chunks(png);
    expect(rest).toEqual([]);
    expect(ihdr!.type).toBe('IHDR');
    expect(ihdr!.data.readUInt32BE(0)).toBe(w);
    expect(ihdr!.data.readUInt32BE(4)).toBe(h);
    // bit depth 8, colour type 2 (RGB), compression 0, filter 0, interlace 0
    expect([...ihdr!.data.subarray(8)]).toEqual([8, 2, 0, 0, 0]);
    expect(idat!.type).toBe('IDAT');
    expect(inflateSync(idat!.data)).toEqual(lines);
    expect(iend).toEqual({ type: 'IEND', data: Buffer.alloc(0) });
  });

  it('keeps every pixel of a larger image', async () => {
    const w = 300;
    const h = 200;
    const lines = scanlines(w, h, (x, y) => [x & 0xff, y & 0xff, (x * y) & 0xff]);
    const idat = chunks(await encodePng(w, h, lines)).find((c) => c.type === 'IDAT')!;
    const raw = inflateSync(idat.data);
    expect(raw.length).toBe(h * (1 + w * 3));
    const at = (x: number, y: number) => [
      ...raw.subarray(y * (1 + w * 3) + 1 + x * 3).subarray(0, 3),
    ];
    expect(at(0, 0)).toEqual([0, 0, 0]);
    expect(at(299, 199)).toEqual([299 & 0xff, 199, (299 * 199) & 0xff]);
    expect(at(17, 42)).toEqual([17, 42, (17 * 42) & 0xff]);
  });

  it('refuses scanlines of the wrong length', async () => {
    await expect(encodePng(2, 2, Buffer.alloc(2 * 7 - 1))).rejects.toThrow(RangeError);
    await expect(encodePng(2, 2, Buffer.alloc(2 * 6))).rejects.toThrow(/need 14 bytes, got 12/);
  });
});
