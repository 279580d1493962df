/**
 * Files through the bridge (src/session/transfer.ts), with real Chromium in a real instance:
 * Playwright's `setInputFiles` and file chooser, and Puppeteer's `uploadFile` and file chooser,
 * with files of this machine (one of 30 MiB), read back in the page with FileReader; downloads
 * through a link with a `download` attribute arrive on this machine (`download.saveAs()`,
 * `download.path()`, Puppeteer's download directory) with the served bytes.
 */
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow, openSession } from 'burrow-sandbox';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { eventually, instanceDisk } from '../../helpers/server.js';

const env = sessionServer('bst-');
const local = mkdtempSync(join(tmpdir(), 'burrow-transfer-'));

/** What the site serves at /download/report.bin. */
const served = randomBytes(2 * 1024 * 1024 + 123);
const small = Buffer.from('a local file, read back in the remote page: ünïcødé ✓\n');
const smallPath = join(local, 'notes.txt');
const bigPath = join(local, 'big.bin');
const big = randomBytes(30 * 1024 * 1024);
const treePath = join(local, 'tree');

const PAGE = `<!doctype html><html><body>
<input type=file id=f multiple>
<input type=file id=g style="display:none">
<input type=file id=d webkitdirectory>
<button id=pick onclick="document.getElementById('g').click()">pick</button>
<a id=dl href="/download/report.bin" download="report.bin">download</a>
</body></html>`;

let site: Server;
let origin: string;
beforeAll(async () => {
  writeFileSync(smallPath, small);
  writeFileSync(bigPath, big);
  mkdirSync(join(treePath, 'sub'), { recursive: true });
  writeFileSync(join(treePath, 'a.txt'), 'first');
  writeFileSync(join(treePath, 'sub', 'b.txt'), 'second, one level down');
  site = createServer((req, res) => {
    if (req.url === '/download/report.bin') {
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': served.length,
      });
      return res.end(served);
    }
    res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => site?.close(resolve));
  rmSync(local, { recursive: true, force: true });
});

/** FNV-1a, the same function in the page and here. */
const FNV = `(bytes) => {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193) >>> 0;
  return h;
}`;
const fnv = new Function(`return ${FNV}`)() as (bytes: Uint8Array) => number;
const expected = (name: string, data: Buffer) => ({ name, size: data.length, hash: fnv(data) });

/** The files of input `#id` as the page reads them with FileReader: `[{name, size, hash}]`. */
const readBack = (id: string) => `(async () => {
  const fnv = ${FNV};
  const out = [];
  for (const file of document.getElementById(${JSON.stringify(id)}).files) {
    const buf = await new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(r.result);
      r.onerror = () => reject(r.error);
      r.readAsArrayBuffer(file);
    });
    out.push({ name: file.name, size: buf.byteLength, hash: fnv(new Uint8Array(buf)) });
  }
  return out;
})()`;

/** `webkitRelativePath` and text of each file of input `#id`. */
const readTree = (
  id: string,
) => `Promise.all([...document.getElementById(${JSON.stringify(id)}).files]
  .map(async (f) => [f.webkitRelativePath, await f.text()]))`;

describe('Playwright session', () => {
  it('setInputFiles and the file chooser take local files, 30 MiB included', async () => {
    await using session = await openSession(env.remote);
    const { page } = session;
    await page.goto(`${origin}/`);
    await page.setInputFiles('#f', [smallPath, bigPath]);
    expect(await page.evaluate(readBack('f'))).toEqual([
      expected('notes.txt', small),
      expected('big.bin', big),
    ]);
    const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.click('#pick')]);
    await chooser.setFiles(smallPath);
    expect(await page.evaluate(readBack('g'))).toEqual([expected('notes.txt', small)]);
    // a file sent once is not sent again while unchanged; a changed one is
    const uploads = () => readdirSync(join(instanceDisk(session.id).home, '.burrow', 'uploads'));
    const before = uploads().length;
    await page.setInputFiles('#f', smallPath);
    expect(uploads()).toHaveLength(before);
    const changed = Buffer.from('changed since');
    writeFileSync(smallPath, changed);
    try {
      await page.setInputFiles('#f', smallPath);
      expect(uploads()).toHaveLength(before + 1);
      expect(await page.evaluate(readBack('f'))).toEqual([expected('notes.txt', changed)]);
    } finally {
      writeFileSync(smallPath, small);
    }
    // a directory, for a webkitdirectory input: its tree arrives as it is here
    await page.setInputFiles('#d', treePath);
    const tree = (await page.evaluate(readTree('d'))) as [string, string][];
    expect(tree.sort()).toEqual([
      ['tree/a.txt', 'first'],
      ['tree/sub/b.txt', 'second, one level down'],
    ]);
  });

  it('a download arrives here: saveAs() and path() hold the served bytes', async () => {
    await using session = await openSession(env.remote);
    const { page } = session;
    await page.goto(`${origin}/`);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#dl')]);
    expect(download.suggestedFilename()).toBe('report.bin');
    const saved = join(local, 'saved-report.bin');
    await download.saveAs(saved);
    expect(readFileSync(saved).equals(served)).toBe(true);
    const path = await download.path();
    expect(existsSync(path)).toBe(true);
    expect(readFileSync(path).equals(served)).toBe(true);
    expect(await download.failure()).toBeNull();

    // a context of its own (Playwright sets its download behaviour per context)
    const context = await session.browser.newContext();
    const other = await context.newPage();
    await other.goto(`${origin}/`);
    const [second] = await Promise.all([other.waitForEvent('download'), other.click('#dl')]);
    expect(readFileSync(await second.path()).equals(served)).toBe(true);
    await context.close();
  });
});

describe('Puppeteer session', () => {
  it('uploadFile and the file chooser take local files', async () => {
    await using session = await openSession({ ...env.remote, driver: 'puppeteer' });
    const { page } = session;
    await page.goto(`${origin}/`);
    const input = (await page.$('input#f'))!;
    await input.uploadFile(smallPath, bigPath);
    expect(await page.evaluate(readBack('f'))).toEqual([
      expected('notes.txt', small),
      expected('big.bin', big),
    ]);
    const [chooser] = await Promise.all([page.waitForFileChooser(), page.click('#pick')]);
    await chooser.accept([smallPath]);
    expect(await page.evaluate(readBack('g'))).toEqual([expected('notes.txt', small)]);

    // a path that exists only in the instance (put there with upload) passes unchanged
    const inside = Buffer.from('already in the instance');
    const client = new Burrow(env.remote);
    const put = await client.instance.upload(session.id, { file: inside, path: 'in/side.txt' });
    await client.close();
    expect(existsSync(put.path)).toBe(false);
    await input.uploadFile(put.path);
    expect(await page.evaluate(readBack('f'))).toEqual([expected('side.txt', inside)]);
  });

  it('downloads land in the local download directory under their own name', async () => {
    await using session = await openSession({ ...env.remote, driver: 'puppeteer' });
    const { page, browser } = session;
    // the CDP recipe on the default context
    const dir = join(local, 'puppeteer-downloads');
    const cdp = await browser.target().createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir });
    await page.goto(`${origin}/`);
    await page.click('#dl');
    const file = join(dir, 'report.bin');
    await eventually(() => existsSync(file), 'the download in the local directory', 30_000);
    expect(readFileSync(file).equals(served)).toBe(true);
    // a second one does not overwrite the first, as with a local browser
    await page.click('#dl');
    const second = join(dir, 'report (1).bin');
    await eventually(() => existsSync(second), 'the second download', 30_000);
    expect(readFileSync(second).equals(served)).toBe(true);

    // Puppeteer's own option, on a context of its own
    const ctxDir = join(local, 'puppeteer-context-downloads');
    const context = await browser.createBrowserContext({
      downloadBehavior: { policy: 'allow', downloadPath: ctxDir },
    });
    const other = await context.newPage();
    await other.goto(`${origin}/`);
    await other.click('#dl');
    const inContext = join(ctxDir, 'report.bin');
    await eventually(() => existsSync(inContext), 'the download of the context', 30_000);
    expect(readFileSync(inContext).equals(served)).toBe(true);
    await context.close();

    // the older recipe: Page.setDownloadBehavior on a page's session
    const pageDir = join(local, 'puppeteer-page-downloads');
    const pageCdp = await page.createCDPSession();
    await pageCdp.send('Page.setDownloadBehavior', { behavior: 'allow', downloadPath: pageDir });
    await page.click('#dl');
    const byPage = join(pageDir, 'report.bin');
    await eventually(() => existsSync(byPage), 'the download of Page.setDownloadBehavior', 30_000);
    expect(readFileSync(byPage).equals(served)).toBe(true);
  });
});

describe('ubuntu session (the desktop browser)', () => {
  it('setInputFiles takes a local file and a download arrives here', async () => {
    await using session = await openSession({ ...env.remote, instanceType: 'ubuntu' });
    const { page } = session;
    await page.goto(`${origin}/`);
    await page.setInputFiles('#f', smallPath);
    expect(await page.evaluate(readBack('f'))).toEqual([expected('notes.txt', small)]);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#dl')]);
    const saved = join(local, 'ubuntu-report.bin');
    await download.saveAs(saved);
    expect(readFileSync(saved).equals(served)).toBe(true);
  });
});

describe('transfer: false', () => {
  it('connects the driver straight to cdp_url', async () => {
    await using direct = await openSession({ ...env.remote, driver: 'puppeteer', transfer: false });
    expect(direct.browser.wsEndpoint()).toBe(direct.cdpUrl);
    await using proxied = await openSession({ ...env.remote, driver: 'puppeteer' });
    expect(proxied.browser.wsEndpoint()).toMatch(
      /^ws:\/\/127\.0\.0\.1:\d+\/[\w-]+\/devtools\/browser$/,
    );
    expect(proxied.browser.wsEndpoint()).not.toBe(proxied.cdpUrl);
  });
});
