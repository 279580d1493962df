/**
 * A minimal PNG encoder: 8-bit RGB, no interlacing, one IDAT chunk compressed with zlib. The
 * caller hands over scanlines that already carry their filter byte (0, "None", is fine for
 * screenshots: zlib finds the repetition of a desktop by itself).
 */
import { promisify } from 'node:util';
import { crc32, deflate } from 'node:zlib';

const deflateAsync = promisify(deflate);

/** The eight bytes every PNG file starts with. */
export const PNG_SIGNATURE: Readonly<Buffer> = Buffer.from([
  0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a,
]);

/** zlib level of the IDAT stream: fast, and close in size to the slower levels on screens. */
const DEFLATE_LEVEL = 3;

/** One chunk: length, type, data, and the CRC-32 of type and data. */
function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/**
 * An 8-bit RGB PNG of `width` × `height` pixels from `scanlines`: per row, one filter-type
 * byte followed by `width` RGB triples.
 */
export async function encodePng(width: number, height: number, scanlines: Buffer): Promise<Buffer> {
  if (scanlines.length !== height * (1 + width * 3)) {
    throw new RangeError(
      `PNG scanlines of ${width}×${height} RGB need ${height * (1 + width * 3)} bytes, got ${scanlines.length}`,
    );
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type RGB; compression, filter and interlace methods 0
  const idat = await deflateAsync(scanlines, { level: DEFLATE_LEVEL });
  return Buffer.concat([
    PNG_SIGNATURE,
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
