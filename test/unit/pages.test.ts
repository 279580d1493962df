/** src/server/pages/pages.ts and the live-view pages it serves: files inlined into one document. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { fillPage, loadPage, scriptJson } from '../../src/server/pages/pages.js';

const dir = mkdtempSync(join(tmpdir(), 'burrow-pages-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return pathToFileURL(join(dir, name));
};

describe('loadPage', () => {
  it('inlines the module scripts the page names, and reads the files once', async () => {
    file('app.page.mjs', "document.title = 'x';\n");
    const url = file(
      'a.html',
      '<p>{{greeting}}</p>\n<script type="module" src="./app.page.mjs"></script>\n',
    );
    const page = await loadPage(url);
    expect(page).toBe(
      '<p>{{greeting}}</p>\n<script type="module">\ndocument.title = \'x\';\n</script>\n',
    );
    file('app.page.mjs', 'changed();\n');
    expect(await loadPage(url)).toBe(page);
  });

  it('leaves other scripts alone', async () => {
    const html = '<script type="module">inline()</script><script src="https://x/y.js"></script>';
    expect(await loadPage(file('b.html', html))).toBe(html);
  });

  it('refuses a module that cannot sit inside a script element, and tries again later', async () => {
    file('bad.page.mjs', "const s = '</script>';\n");
    const url = file('c.html', '<script type="module" src="./bad.page.mjs"></script>');
    await expect(loadPage(url)).rejects.toThrow(/bad\.page\.mjs cannot be inlined/);
    file('bad.page.mjs', 'ok();\n');
    await expect(loadPage(url)).resolves.toContain('ok();');
  });

  it('rejects for a missing page or module', async () => {
    await expect(loadPage(pathToFileURL(join(dir, 'none.html')))).rejects.toThrow(/ENOENT/);
    const url = file('d.html', '<script type="module" src="./missing.mjs"></script>');
    await expect(loadPage(url)).rejects.toThrow(/ENOENT/);
  });
});

describe('fillPage and scriptJson', () => {
  it('fills every placeholder, literally', () => {
    expect(fillPage('{{a}} and {{b}}, {{a}}', { a: '$&', b: 'B' })).toBe('$& and B, $&');
  });

  it('refuses a placeholder without a value', () => {
    expect(() => fillPage('{{a}} {{c}}', { a: '1' })).toThrow('The page has no value for {{c}}');
  });

  it('writes JSON that cannot end a script element', () => {
    const json = scriptJson({ v: '</script><!-- & >' });
    expect(json).not.toMatch(/[<>&]/);
    expect(JSON.parse(json)).toEqual({ v: '</script><!-- & >' });
  });
});

describe('the live-view pages', () => {
  const load = (path: string) => loadPage(new URL(`../../src/server/${path}`, import.meta.url));

  it('browser: one document with its script inlined, nothing to fill', async () => {
    const page = await load('browser/liveview.html');
    expect(page).toMatch(/^<!doctype html>/);
    expect(page).not.toMatch(/<script[^>]*\ssrc=/);
    expect(page).toContain("new URL('ws' + location.search, location.href)");
    expect(page).not.toContain('{{');
  });

  it('ubuntu: the import map and the viewer options are filled in as JSON', async () => {
    const page = fillPage(await load('ubuntu/liveview.html'), {
      importmap: scriptJson({ imports: { './novnc/core/rfb.js': './novnc/core/rfb.js?token=t' } }),
      options: scriptJson({ password: 'p</script>' }),
    });
    expect(page).not.toMatch(/<script[^>]*\ssrc=/);
    expect(page).toContain("import RFB from './novnc/core/rfb.js';");
    const json = (type: string) =>
      JSON.parse(new RegExp(`<script type="${type}"[^>]*>([^<]*)</script>`).exec(page)![1]!);
    expect(json('importmap')).toEqual({
      imports: { './novnc/core/rfb.js': './novnc/core/rfb.js?token=t' },
    });
    expect(json('application/json')).toEqual({ password: 'p</script>' });
  });
});
