/**
 * A minimal PNG encoder and decoder. Encoding: 8-bit RGB, no interlacing, one IDAT chunk
 * compressed with zlib; the caller hands over scanlines that already carry their filter byte (0,
 * "None", is fine for screenshots: zlib finds the repetition of a desktop by itself). Decoding:
 * 8-bit grey, grey + alpha, RGB or RGBA, not interlaced — what Chromium and burrow's desktop
 * produce.
 */
import { promisify } from 'node:util';
import { crc32, deflate, inflate, inflateSync } from 'node:zlib';

const deflateAsync = promisify(deflate);
const inflateAsync = promisify(inflate);

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

/** `[width, height]` from a PNG's IHDR. */
export function pngSize(png: Buffer): [number, number] {
  if (png.length < 24 || png.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG image');
  return [png.readUInt32BE(16), png.readUInt32BE(20)];
}

/** Decoded pixels: `channels` bytes each (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA), row after row. */
export interface DecodedPng {
  width: number;
  height: number;
  channels: number;
  pixels: Buffer;
}

const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 4: 2, 6: 4 };

/** Size, channels and the concatenated IDAT data of `png`; throws for what it cannot decode. */
function layout(png: Buffer): { width: number; height: number; channels: number; idat: Buffer } {
  const [width, height] = pngSize(png);
  const depth = png[24];
  const colour = png[25]!;
  const interlace = png[28];
  const channels = CHANNELS[colour];
  if (depth !== 8 || channels === undefined || interlace !== 0) {
    throw new Error(
      `unsupported PNG (bit depth ${depth}, colour type ${colour}, interlace ${interlace})`,
    );
  }
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length;) {
    const len = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + len));
    if (type === 'IEND') break;
    at += 12 + len;
  }
  return { width, height, channels, idat: Buffer.concat(idat) };
}

/** Undo the per-row filters of inflated scanlines (every filter type of the PNG spec). */
function unfilter(raw: Buffer, width: number, height: number, channels: number): Buffer {
  const stride = width * channels;
  const rows = Buffer.alloc(stride * height);
  let prev = Buffer.alloc(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = rows.subarray(y * stride, (y + 1) * stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? out[i - channels]! : 0;
      const b = prev[i]!;
      const c = i >= channels ? prev[i - channels]! : 0;
      let v = line[i]!;
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[i] = v & 0xff;
    }
    prev = out;
  }
  return rows;
}

/** Decode `png` (inflating off the event loop's thread). */
export async function decodePng(png: Buffer): Promise<DecodedPng> {
  const { width, height, channels, idat } = layout(png);
  const pixels = unfilter(await inflateAsync(idat), width, height, channels);
  return { width, height, channels, pixels };
}

/** `decodePng`, synchronously. */
export function decodePngSync(png: Buffer): DecodedPng {
  const { width, height, channels, idat } = layout(png);
  return { width, height, channels, pixels: unfilter(inflateSync(idat), width, height, channels) };
}
