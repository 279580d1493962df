/**
 * The transfer proxy (src/session/transfer.ts) names a download written with Puppeteer's `allow`
 * after the page's suggested file name, which the remote page controls: it must stay one file
 * name inside the driver's download directory.
 */
import { describe, expect, it } from 'vitest';
import { safeName } from '../../src/session/transfer.js';

describe('safeName', () => {
  it('keeps an ordinary name', () => {
    expect(safeName('report.pdf')).toBe('report.pdf');
    expect(safeName('Bericht März (final).xlsx')).toBe('Bericht März (final).xlsx');
  });

  it('never yields a path: separators, traversal and control characters go', () => {
    expect(safeName('../../etc/passwd')).toBe('.._.._etc_passwd');
    expect(safeName('..\\..\\x.txt')).toBe('.._.._x.txt');
    expect(safeName('/abs/path')).toBe('_abs_path');
    expect(safeName('a\u0000b\nc')).toBe('a_b_c');
    for (const bad of ['', '.', '..', '   ']) expect(safeName(bad)).toBe('download');
  });
});
