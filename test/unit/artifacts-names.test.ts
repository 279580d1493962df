/**
 * The pure parts of downloads (src/server/artifacts/store.ts, src/server/chromium/downloads.ts): names
 * from a page made harmless, the `content-disposition` built from them, the media type guess, and
 * how a client's download behaviour is rewritten to the instance's directory.
 */
import { describe, expect, it } from 'vitest';
import { contentDisposition, mimeTypeOf, safeFilename } from '../../src/server/artifacts/store.js';
import { DownloadWatch } from '../../src/server/chromium/downloads.js';

describe('safeFilename', () => {
  it.each([
    ['report.pdf', 'report.pdf'],
    ['../../etc/passwd', 'passwd'],
    ['..\\..\\windows\\evil.bat', 'evil.bat'],
    ['.bashrc', 'bashrc'],
    ['..', 'download'],
    ['', 'download'],
    ['a\u0000b\nc.txt', 'a_b_c.txt'],
    ['dir/', 'download'],
  ])('%j → %j', (input, out) => {
    expect(safeFilename(input, 'download')).toBe(out);
  });

  it('caps the length', () => {
    expect(safeFilename('x'.repeat(1000), 'd')).toHaveLength(200);
  });
});

describe('contentDisposition', () => {
  it('quotes an ASCII fallback and carries the UTF-8 name', () => {
    const h = contentDisposition('résumé "final".pdf');
    expect(h).toBe(
      `attachment; filename="r_sum_ _final_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.pdf`,
    );
    expect(h).not.toMatch(/[\r\n]/);
  });
});

describe('mimeTypeOf', () => {
  it('guesses from the extension, else octet-stream', () => {
    expect(mimeTypeOf('a.PDF')).toBe('application/pdf');
    expect(mimeTypeOf('a.csv')).toBe('text/csv');
    expect(mimeTypeOf('noext')).toBe('application/octet-stream');
  });
});

describe('DownloadWatch.rewrite', () => {
  const watch = new DownloadWatch({
    downloadDir: '/home/user/Downloads',
    downloadBegan: () => {},
    downloadProgress: () => {},
  });

  it('points allow, allowAndName and default at the instance, keeping the rest', () => {
    for (const behavior of ['allow', 'allowAndName', 'default']) {
      expect(
        watch.rewrite('Browser.setDownloadBehavior', {
          behavior,
          downloadPath: '/Users/me/Downloads',
          browserContextId: 'CTX',
          eventsEnabled: true,
        }),
      ).toEqual({
        behavior: 'allowAndName',
        downloadPath: '/home/user/Downloads',
        browserContextId: 'CTX',
        eventsEnabled: true,
      });
    }
    expect(
      watch.rewrite('Page.setDownloadBehavior', { behavior: 'allow', downloadPath: '/tmp/x' }),
    ).toEqual({ behavior: 'allowAndName', downloadPath: '/home/user/Downloads' });
  });

  it('keeps deny and every other command as they are', () => {
    const deny = { behavior: 'deny' };
    expect(watch.rewrite('Browser.setDownloadBehavior', deny)).toBe(deny);
    const other = { url: 'x' };
    expect(watch.rewrite('Page.navigate', other)).toBe(other);
  });
});
