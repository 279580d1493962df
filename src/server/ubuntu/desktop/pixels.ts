/**
 * X ZPixmap pixels → PNG scanlines. The common case (32 bits per pixel, 8-bit channels in
 * BGRX byte order) is a byte shuffle; other true-colour formats (16, 24, 32 bits with any
 * channel masks) go through the masks of the root visual.
 *
 * The X server is the instance's, so the format is the instance's to choose, and a screen's
 * worth of pixels is seconds of work in the slowest format: the rows are converted a few at a
 * time (`rgbRows` is a generator for cpu-share.ts's `inSlices`), strip by strip as they came,
 * without joining the strips first.
 */
import { stride, type PixelFormat } from './x11-wire.js';

/** How the screen stores a pixel: its format and the root visual's channel masks. */
export interface PixelLayout {
  format: PixelFormat;
  masks: { red: number; green: number; blue: number };
}

/** Pixels converted between two pauses of `rgbRows`: well under a millisecond in any format. */
const PIXELS_PER_STEP = 16_384;

/** A channel's mask as what reads it: its shift and its largest value. */
function channel(mask: number): { mask: number; shift: number; max: number } {
  const shift = mask === 0 ? 0 : 31 - Math.clz32(mask & -mask);
  return { mask, shift, max: mask >>> shift };
}

/** A channel's value scaled to 0‥255 from a pixel value. */
const scaled = (v: number, c: { mask: number; shift: number; max: number }): number =>
  c.max === 0 ? 0 : Math.round((((v & c.mask) >>> c.shift) * 255) / c.max);

/**
 * `w` × `h` pixels of ZPixmap data (rows padded to the format's scanline pad, in consecutive
 * strips of whole rows) as PNG scanlines: filter byte 0 and RGB triples per row. Pauses
 * (`yield`) every `PIXELS_PER_STEP` pixels or so; returns the scanlines. Throws for strips that
 * do not hold `h` rows.
 */
export function* rgbRows(
  layout: PixelLayout,
  strips: readonly Buffer[],
  w: number,
  h: number,
): Generator<void, Buffer> {
  const { format, masks } = layout;
  const rowBytes = stride(format, w);
  const bpp = format.bitsPerPixel;
  if (!(rowBytes >= (w * bpp) / 8) || ![16, 24, 32].includes(bpp)) {
    throw new Error(`Unsupported X pixel format (${bpp} bits, scanline pad ${format.scanlinePad})`);
  }
  const out = Buffer.alloc(h * (1 + w * 3));
  const standard =
    bpp === 32 && masks.red === 0xff0000 && masks.green === 0xff00 && masks.blue === 0xff;
  const [r, g, b] = [channel(masks.red), channel(masks.green), channel(masks.blue)];
  const rowsPerStep = Math.max(1, Math.floor(PIXELS_PER_STEP / Math.max(1, w)));
  let o = 0;
  let row = 0;
  for (const src of strips) {
    const rows = Math.min(Math.floor(src.length / rowBytes), h - row);
    for (let first = 0; first < rows; first += rowsPerStep) {
      const last = Math.min(rows, first + rowsPerStep);
      for (let i = first; i < last; i++) {
        out[o++] = 0;
        let s = i * rowBytes;
        if (standard) {
          for (let col = 0; col < w; col++, s += 4) {
            out[o++] = src[s + 2]!;
            out[o++] = src[s + 1]!;
            out[o++] = src[s]!;
          }
          continue;
        }
        for (let col = 0; col < w; col++) {
          let v = src[s]! | (src[s + 1]! << 8);
          if (bpp >= 24) v |= src[s + 2]! << 16;
          if (bpp === 32) v |= src[s + 3]! << 24;
          s += bpp >>> 3;
          out[o++] = scaled(v, r);
          out[o++] = scaled(v, g);
          out[o++] = scaled(v, b);
        }
      }
      yield;
    }
    row += rows;
  }
  if (row < h) throw new Error(`X image data of ${row} rows where ${h} were asked for`);
  return out;
}

/** `rgbRows` at once, for small images (tests). */
export function toRgbRows(
  layout: PixelLayout,
  strips: readonly Buffer[],
  w: number,
  h: number,
): Buffer {
  const steps = rgbRows(layout, strips, w, h);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}
