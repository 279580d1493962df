/**
 * X ZPixmap pixels → PNG scanlines. The common case (32 bits per pixel, 8-bit channels in
 * BGRX byte order) is a byte shuffle; other true-colour formats (16, 24, 32 bits with any
 * channel masks) go through the masks of the root visual.
 */
import { stride, type PixelFormat } from './x11-wire.js';

/** How the screen stores a pixel: its format and the root visual's channel masks. */
export interface PixelLayout {
  format: PixelFormat;
  masks: { red: number; green: number; blue: number };
}

/** A channel's value scaled to 0‥255 from a pixel value, given the channel's mask. */
function channel(mask: number): (pixel: number) => number {
  const shift = mask === 0 ? 0 : 31 - Math.clz32(mask & -mask);
  const max = mask >>> shift;
  return (v) => (max === 0 ? 0 : Math.round((((v & mask) >>> shift) * 255) / max));
}

/**
 * `w` × `h` pixels of ZPixmap data (rows padded to the format's scanline pad, possibly in
 * several consecutive strips) as PNG scanlines: filter byte 0 and RGB triples per row.
 */
export function toRgbRows(layout: PixelLayout, strips: Buffer[], w: number, h: number): Buffer {
  const { format, masks } = layout;
  const out = Buffer.alloc(h * (1 + w * 3));
  const src = strips.length === 1 ? strips[0]! : Buffer.concat(strips);
  const rowBytes = stride(format, w);
  const bpp = format.bitsPerPixel;
  const standard =
    bpp === 32 && masks.red === 0xff0000 && masks.green === 0xff00 && masks.blue === 0xff;
  const [r, g, b] = [channel(masks.red), channel(masks.green), channel(masks.blue)];
  let o = 0;
  for (let row = 0; row < h; row++) {
    out[o++] = 0;
    let s = row * rowBytes;
    if (standard) {
      for (let col = 0; col < w; col++, s += 4) {
        out[o++] = src[s + 2]!;
        out[o++] = src[s + 1]!;
        out[o++] = src[s]!;
      }
    } else {
      for (let col = 0; col < w; col++) {
        const v =
          bpp === 32
            ? src.readUInt32LE(s)
            : bpp === 24
              ? src.readUIntLE(s, 3)
              : src.readUInt16LE(s);
        s += bpp / 8;
        out[o++] = r(v);
        out[o++] = g(v);
        out[o++] = b(v);
      }
    }
  }
  return out;
}
