/**
 * The extension store on a real directory: what it keeps of a good archive, and that every kind of
 * bad one (not a zip, no or a bad manifest, `../` and absolute names, links, too large) is refused
 * with a message naming the problem and leaves nothing on disk.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HttpError } from '../../src/server/errors.js';
import { ExtensionInvalid, ExtensionStore } from '../../src/server/extensions/store.js';
import { makeZip, testExtension, type ZipInput } from '../helpers/zip.js';

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'burrow-ext-'));
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

const root = () => join(dataDir, 'extensions');

async function refused(store: ExtensionStore, zip: Buffer, code: string, detail: RegExp) {
  const err = await store.add(zip, 'x.zip').catch((e: unknown) => e);
  if (code === 'extension_invalid') {
    expect(err).toBeInstanceOf(ExtensionInvalid);
    expect((err as ExtensionInvalid).reason).toMatch(detail);
  } else {
    expect(err).toBeInstanceOf(HttpError);
    expect((err as HttpError).code).toBe(code);
    expect((err as HttpError).detail).toMatch(detail);
  }
  expect(readdirSync(root())).toEqual([]); // nothing half-written stays
  expect(await store.list()).toEqual([]);
}

const manifest = (m: object): ZipInput => ({ name: 'manifest.json', data: JSON.stringify(m) });

describe('ExtensionStore', () => {
  it('unpacks a good archive, lists it, reloads it, and deletes it', async () => {
    const store = new ExtensionStore(dataDir, { maxBytes: 1 << 20 });
    const info = await store.add(makeZip(testExtension('v1')), 'ext.zip');
    expect(info).toMatchObject({
      name: 'burrow test extension',
      version: '1.2.3',
      manifest_version: 3,
      description: 'rewrites pages and adds a header',
      filename: 'ext.zip',
    });
    expect(info.id).toMatch(/^ext_[0-9a-f]{16}$/);
    const [found] = await store.resolve([info.id]);
    expect(readFileSync(join(found!.dir, 'rules', 'headers.json'), 'utf8')).toContain(
      'x-burrow-ext',
    );
    expect(readFileSync(join(found!.dir, 'content.js'), 'utf8')).toContain('"v1"');
    expect(info.size_bytes).toBeGreaterThan(100);

    const again = new ExtensionStore(dataDir, { maxBytes: 1 << 20 });
    await again.ready;
    expect(await again.list()).toEqual([info]);
    await again.delete(info.id);
    expect(await again.list()).toEqual([]);
    expect(readdirSync(root())).toEqual([]);
    await expect(again.delete(info.id)).rejects.toMatchObject({ code: 'extension_not_found' });
    await expect(again.resolve(['ext_nope'])).rejects.toThrow(/Extension "ext_nope" not found/);
  });

  it('takes the archive of a folder (one top folder holding manifest.json)', async () => {
    const store = new ExtensionStore(dataDir, { maxBytes: 1 << 20 });
    const inFolder = testExtension().map((e) => ({ ...e, name: `my-ext/${e.name}` }));
    const info = await store.add(makeZip([{ name: 'my-ext/', mode: 0o040755 }, ...inFolder]), null);
    const [found] = await store.resolve([info.id]);
    expect(readdirSync(found!.dir).sort()).toEqual(['content.js', 'manifest.json', 'rules']);
  });

  it('refuses what is not a loadable extension, keeping nothing', async () => {
    const store = new ExtensionStore(dataDir, { maxBytes: 4096 });
    const good = testExtension();
    await refused(
      store,
      Buffer.from('not a zip at all, just text'),
      'extension_invalid',
      /not a zip/,
    );
    await refused(
      store,
      makeZip([{ name: 'a.js', data: '1' }]),
      'extension_invalid',
      /no manifest\.json/,
    );
    await refused(
      store,
      makeZip([{ name: 'manifest.json', data: '{oops' }]),
      'extension_invalid',
      /not valid JSON/,
    );
    await refused(
      store,
      makeZip([manifest({ manifest_version: 2, name: 'old', version: '1' })]),
      'extension_invalid',
      /manifest_version 2; Chromium loads only 3/,
    );
    await refused(
      store,
      makeZip([manifest({ manifest_version: 3, version: '1' })]),
      'extension_invalid',
      /no name/,
    );
    await refused(
      store,
      makeZip([manifest({ manifest_version: 3, name: 'x', version: 'one' })]),
      'extension_invalid',
      /no version/,
    );
    await refused(
      store,
      makeZip([...good, { name: '../escape.js', data: 'x' }]),
      'extension_invalid',
      /"\.\.\/escape\.js" leaves its folder/,
    );
    await refused(
      store,
      makeZip([...good, { name: 'rules/../../x', data: 'x' }]),
      'extension_invalid',
      /leaves its folder/,
    );
    await refused(
      store,
      makeZip([...good, { name: '/etc/passwd', data: 'x' }]),
      'extension_invalid',
      /absolute path/,
    );
    await refused(
      store,
      makeZip([...good, { name: 'link', data: '/etc/shadow', mode: 0o120777 }]),
      'extension_invalid',
      /"link" is a link/,
    );
    await refused(
      store,
      makeZip([...good, { name: 'content.js', data: 'again' }]),
      'extension_invalid',
      /appears twice/,
    );
    await refused(
      store,
      makeZip([...good, { name: '_metadata/x', data: 'x' }]),
      'extension_invalid',
      /reserves/,
    );
    // a bomb: a small archive that unpacks past the limit
    await refused(
      store,
      makeZip([...good, { name: 'big.txt', data: Buffer.alloc(8192), deflate: true }]),
      'extension_invalid',
      /larger than 4096 bytes/,
    );
    // an entry whose header understates what it inflates to
    const lying = makeZip([...good, { name: 'x.txt', data: Buffer.alloc(3000), deflate: true }]);
    const at = lying.lastIndexOf(Buffer.from('x.txt')) - 46 + 24; // central header's size
    lying.writeUInt32LE(10, at);
    await refused(store, lying, 'extension_invalid', /"x\.txt"/);
    const big = makeZip([...good, { name: 'pad', data: Buffer.alloc(5000) }]);
    await refused(store, big, 'extension_too_large', /larger than 4096 bytes/);
  });

  it('removes half-written uploads of an earlier run when it opens', async () => {
    const first = new ExtensionStore(dataDir, { maxBytes: 1 << 20 });
    await first.ready;
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(join(root(), '.tmp-ext_0000000000000000', 'files'), { recursive: true });
    writeFileSync(join(root(), '.tmp-ext_0000000000000000', 'files', 'half'), 'x');
    const second = new ExtensionStore(dataDir, { maxBytes: 1 << 20 });
    await second.ready;
    expect(readdirSync(root())).toEqual([]);
  });
});
