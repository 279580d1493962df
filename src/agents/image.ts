/**
 * What the vendor mappings do to screenshots: read a PNG's size, decode it (8-bit grey, grey +
 * alpha, RGB or RGBA, not interlaced: what Chromium and burrow's desktop produce), crop a region
 * and resample to the size a model works at, and encode the result (src/internal/png.ts).
 */
import { promisify } from 'node:util';
import { inflate } from 'node:zlib';
import { encodePng } from '../internal/png.js';

const inflateAsync = promisify(inflate);

/** RGB pixels, 3 bytes each, row after row. */
export interface Rgb {
  width: number;
  height: number;
  data: Buffer;
}

/** `[width, height]` from a PNG's IHDR. */
export function pngSize(png: Buffer): [number, number] {
  if (png.length < 24 || png.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG image');
  return [png.readUInt32BE(16), png.readUInt32BE(20)];
}

const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 4: 2, 6: 4 };

export async function decodePng(png: Buffer): Promise<Rgb> {
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
  const raw = await inflateAsync(Buffer.concat(idat));
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
  const data = Buffer.alloc(width * height * 3);
  for (let p = 0, s = 0; p < width * height; p++, s += channels) {
    if (channels >= 3) {
      data[p * 3] = rows[s]!;
      data[p * 3 + 1] = rows[s + 1]!;
      data[p * 3 + 2] = rows[s + 2]!;
    } else {
      data.fill(rows[s]!, p * 3, p * 3 + 3);
    }
  }
  return { width, height, data };
}

export async function encodeRgb(img: Rgb): Promise<Buffer> {
  const row = img.width * 3;
  const lines = Buffer.alloc(img.height * (row + 1));
  for (let y = 0; y < img.height; y++) {
    img.data.copy(lines, y * (row + 1) + 1, y * row, (y + 1) * row);
  }
  return encodePng(img.width, img.height, lines);
}

/**
 * The region `[x0, y0, x1, y1)` of `img` (clamped to it) resampled to `width` × `height`: each
 * target pixel is the mean of the source pixels it covers (the nearest one when enlarging).
 */
export function resample(
  img: Rgb,
  region: readonly [number, number, number, number],
  width: number,
  height: number,
): Rgb {
  const x0 = Math.max(0, Math.min(img.width - 1, Math.floor(region[0])));
  const y0 = Math.max(0, Math.min(img.height - 1, Math.floor(region[1])));
  const x1 = Math.max(x0 + 1, Math.min(img.width, Math.ceil(region[2])));
  const y1 = Math.max(y0 + 1, Math.min(img.height, Math.ceil(region[3])));
  const sx = (x1 - x0) / width;
  const sy = (y1 - y0) / height;
  const data = Buffer.alloc(width * height * 3);
  for (let ty = 0; ty < height; ty++) {
    const fy0 = y0 + Math.floor(ty * sy);
    const fy1 = Math.max(fy0 + 1, Math.min(y1, y0 + Math.floor((ty + 1) * sy)));
    for (let tx = 0; tx < width; tx++) {
      const fx0 = x0 + Math.floor(tx * sx);
      const fx1 = Math.max(fx0 + 1, Math.min(x1, x0 + Math.floor((tx + 1) * sx)));
      let r = 0;
      let g = 0;
      let b = 0;
      for (let y = fy0; y < fy1; y++) {
        for (let x = fx0; x < fx1; x++) {
          const s = (y * img.width + x) * 3;
          r += img.data[s]!;
          g += img.data[s + 1]!;
          b += img.data[s + 2]!;
        }
      }
      const n = (fy1 - fy0) * (fx1 - fx0);
      const d = (ty * width + tx) * 3;
      data[d] = Math.round(r / n);
      data[d + 1] = Math.round(g / n);
      data[d + 2] = Math.round(b / n);
    }
  }
  return { width, height, data };
}
