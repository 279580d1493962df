/** ZPixmap → PNG scanlines for the pixel formats an X server may hand the desktop's X client. */
import { describe, expect, it } from 'vitest';
import { toRgbRows, type PixelLayout } from '../../src/server/ubuntu/desktop/pixels.js';

const BGRX: PixelLayout = {
  format: { depth: 24, bitsPerPixel: 32, scanlinePad: 32 },
  masks: { red: 0xff0000, green: 0xff00, blue: 0xff },
};
const RGB565: PixelLayout = {
  format: { depth: 16, bitsPerPixel: 16, scanlinePad: 32 },
  masks: { red: 0xf800, green: 0x7e0, blue: 0x1f },
};

describe('toRgbRows', () => {
  it('shuffles 32-bit BGRX into RGB rows, each led by filter byte 0', () => {
    // 2 × 2: red, green / blue, white (the X byte is ignored)
    // prettier-ignore
    const src = Buffer.from([
      0, 0, 255, 0x11,     0, 255, 0, 0x22,
      255, 0, 0, 0x33,     255, 255, 255, 0x44,
    ]);
    // prettier-ignore
    expect([...toRgbRows(BGRX, [src], 2, 2)]).toEqual([
      0,   255, 0, 0,     0, 255, 0,
      0,   0, 0, 255,     255, 255, 255,
    ]);
  });

  it('joins strips of rows fetched separately', () => {
    const row = (b: number, g: number, r: number) => Buffer.from([b, g, r, 0]);
    const rows = toRgbRows(BGRX, [row(1, 2, 3), row(4, 5, 6), row(7, 8, 9)], 1, 3);
    expect([...rows]).toEqual([0, 3, 2, 1, 0, 6, 5, 4, 0, 9, 8, 7]);
  });

  it('scales 16-bit channels through the masks and skips row padding', () => {
    // width 3 at 16 bpp = 6 bytes, padded to 8 per row
    const row = (...pixels: number[]) =>
      Buffer.concat([...pixels.map((v) => Buffer.from([v & 0xff, v >> 8])), Buffer.alloc(2, 0xee)]);
    const src = Buffer.concat([
      row(0xf800, 0x07e0, 0x001f), // red, green, blue
      row(0xffff, 0x0000, 0x8410), // white, black, mid grey
    ]);
    // prettier-ignore
    expect([...toRgbRows(RGB565, [src], 3, 2)]).toEqual([
      0,   255, 0, 0,       0, 255, 0,     0, 0, 255,
      0,   255, 255, 255,   0, 0, 0,       132, 130, 132,
    ]);
  });

  it('reads 32-bit pixels with other masks (RGBX in memory)', () => {
    const layout: PixelLayout = {
      format: { depth: 24, bitsPerPixel: 32, scanlinePad: 32 },
      masks: { red: 0xff, green: 0xff00, blue: 0xff0000 },
    };
    const src = Buffer.from([10, 20, 30, 0]); // value 0x001e140a: red 10, green 20, blue 30
    expect([...toRgbRows(layout, [src], 1, 1)]).toEqual([0, 10, 20, 30]);
  });

  it('reads packed 24-bit pixels', () => {
    const layout: PixelLayout = {
      format: { depth: 24, bitsPerPixel: 24, scanlinePad: 32 },
      masks: { red: 0xff0000, green: 0xff00, blue: 0xff },
    };
    // width 1: 3 bytes padded to 4
    const src = Buffer.from([0x30, 0x20, 0x10, 0xee, 0x03, 0x02, 0x01, 0xee]);
    expect([...toRgbRows(layout, [src], 1, 2)]).toEqual([0, 0x10, 0x20, 0x30, 0, 1, 2, 3]);
  });
});
