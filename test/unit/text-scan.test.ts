/**
 * The sliced line helpers the edit and file tools use instead of splitting a file into lines
 * (src/server/toolbox/text-scan.ts) answer what the split did, on texts of every shape, and a
 * text of millions of newlines is worked through without an array of lines.
 */
import { describe, expect, it } from 'vitest';
import {
  countSliced,
  lineSlice,
  lineStart,
  decodeSliced,
  encodeSliced,
  lineStarts,
  linesHolding,
  replaceAllSliced,
} from '../../src/server/toolbox/text-scan.js';

const pieces = ['a', 'b', '\n', 'ab', '\n\n', 'é', ''];
let seed = 7;
const rnd = (n: number) => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
  return seed % n;
};
const text = () => Array.from({ length: rnd(9) }, () => pieces[rnd(pieces.length)]).join('');

describe('text-scan', () => {
  it('answers what split, count and join answered', async () => {
    for (let i = 0; i < 400; i++) {
      const t = text();
      const lines = t.split('\n');
      const needle = ['a', 'b', '\n', 'ab', ''][rnd(5)]!;
      expect(await countSliced(t, needle)).toBe(
        needle === '' ? t.length + 1 : t.split(needle).length - 1,
      );
      const n = rnd(lines.length + 2);
      const start = n < lines.length ? lines.slice(0, n).join('\n').length + (n > 0 ? 1 : 0) : -1;
      expect(await lineStart(t, n)).toBe(n === 0 ? 0 : start);
      const a = rnd(lines.length + 1);
      const b = a + rnd(4);
      expect(await lineSlice(t, a, b)).toBe(lines.slice(a, b).join('\n'));
      if (needle !== '') {
        expect(await replaceAllSliced(t, needle, 'XY')).toBe(t.split(needle).join('XY'));
      }
      if (!needle.includes('\n')) {
        const holding = lines.flatMap((line, k) => (line.includes(needle) ? [k + 1] : []));
        expect(await linesHolding(t, needle, 2)).toEqual({
          lines: holding.slice(0, 2),
          total: holding.length,
        });
      }
    }
  });

  it('works through 8 million newlines and finds lines in one pass', async () => {
    const t = '\n'.repeat(8 * 1024 * 1024);
    expect(await countSliced(t, '\n')).toBe(8 * 1024 * 1024);
    expect(await lineStarts(t, [0, 1, 5_000_000, 9_000_000])).toEqual([0, 1, 5_000_000, -1]);
    expect(await linesHolding(t, '', 3)).toEqual({ lines: [1, 2, 3], total: 8 * 1024 * 1024 + 1 });
  });

  it('decodes strict UTF-8 and encodes it again a piece at a time, pairs and sequences whole', async () => {
    const text = 'é😀x'.repeat(200_000);
    const bytes = Buffer.from(text, 'utf8');
    expect(await decodeSliced(bytes)).toBe(text);
    expect((await encodeSliced(text)).equals(bytes)).toBe(true);
    expect(await decodeSliced(Buffer.concat([bytes, Buffer.from([0xff])]))).toBeUndefined();
    expect(await decodeSliced(Buffer.from([0xe2, 0x82]))).toBeUndefined();
  });
});
