/**
 * What the vendor mappings do to screenshots: decode one to RGB, crop a region and resample it
 * to the size a model works at, and encode the result (decoding and encoding: src/internal/png.ts).
 */
import { decodePng as decodeRaw, encodePng, pngSize } from '../internal/png.js';

export { pngSize };

/** RGB pixels, 3 bytes each, row after row. */
export interface Rgb {
  width: number;
  height: number;
  data: Buffer;
}

/** `png` as RGB (grey spread to the three channels, alpha dropped). */
export async function decodePng(png: Buffer): Promise<Rgb> {
  const { width, height, channels, pixels } = await decodeRaw(png);
  const data = Buffer.alloc(width * height * 3);
  for (let p = 0, s = 0; p < width * height; p++, s += channels) {
    if (channels >= 3) {
      data[p * 3] = pixels[s]!;
      data[p * 3 + 1] = pixels[s + 1]!;
      data[p * 3 + 2] = pixels[s + 2]!;
    } else {
      data.fill(pixels[s]!, p * 3, p * 3 + 3);
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
