/**
 * The bridge's transfer proxy (src/session/transfer.ts) when an upload is refused: the driver's
 * call fails at once with the server's reason (Playwright too, whose retries the proxy ends) and
 * the input stays empty; and the proxy goes away with the session.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Burrow, openSession } from 'burrow-sandbox';
import { TransferProxy, transferSetup } from '../../../src/session/transfer.js';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { eventually } from '../../helpers/server.js';

const env = sessionServer('bsl-', { maxUploadBytes: 1024 * 1024 });
const local = mkdtempSync(join(tmpdir(), 'burrow-transfer-limits-'));
afterAll(() => rmSync(local, { recursive: true, force: true }));

/** What a WebSocket handshake to `u` gets: 101, the refusal's status and body, or an error code. */
const handshake = (u: string) =>
  new Promise<{ status: number | string; body?: string }>((resolve) => {
    const ws = new WebSocket(u);
    ws.once('open', () => {
      ws.close();
      resolve({ status: 101 });
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += String(c)));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('error', (e: NodeJS.ErrnoException) => resolve({ status: e.code ?? 'error' }));
  });
const status = async (u: string) => (await handshake(u)).status;

describe('transfer proxy limits', () => {
  it('a file past the upload limit fails at once with the limit and its setting, in Puppeteer and Playwright', async () => {
    const tooBig = join(local, 'too-big.bin');
    writeFileSync(tooBig, randomBytes(2 * 1024 * 1024));
    {
      await using session = await openSession({ ...env.remote, driver: 'puppeteer' });
      const { page } = session;
      await page.setContent('<input type=file id=f>');
      const input = (await page.$('input#f'))!;
      const err = await input.uploadFile(tooBig).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/burrow could not upload/);
      expect(err?.message).toMatch(/too large|larger than|limit/i);
      expect(await page.evaluate(() => document.querySelector('input')!.files!.length)).toBe(0);
    }
    // Playwright retries a failing DOM.setFileInputFiles until its timeout: the proxy ends the
    // retries at once, with the reason, the limit and the setting that raises it (issue 20)
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      await using session = await openSession(env.remote);
      const { page } = session;
      await page.setContent('<input type=file id=f>');
      const started = Date.now();
      const err = await page.setInputFiles('#f', tooBig).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(Date.now() - started).toBeLessThan(5_000); // not Playwright's 30 s timeout
      expect(err?.message).toContain(`burrow could not upload`);
      expect(err?.message).toContain('Upload larger than 1048576 bytes');
      expect(err?.message).toContain('BURROW_MAX_UPLOAD_BYTES');
      expect(err?.message).not.toMatch(/Timeout/);
      expect(await page.evaluate(() => document.querySelector('input')!.files!.length)).toBe(0);
      // the session goes on: a file under the limit is set right after
      const small = join(local, 'small.txt');
      writeFileSync(small, 'small');
      await page.setInputFiles('#f', small);
      expect(await page.evaluate(() => document.querySelector('input')!.files![0]!.name)).toBe(
        'small.txt',
      );
    } finally {
      process.off('warning', onWarning);
    }
    const ours = warnings.filter((w) => (w as { code?: string }).code === 'BURROW_UPLOAD_FAILED');
    expect(ours).toHaveLength(1);
    expect(ours[0]!.message).toContain(tooBig);
  });

  it('a download that cannot be saved here ends at once as canceled, and a warning says why', async () => {
    const site = createServer((req, res) => {
      if (req.url === '/f.bin') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return void res.end(randomBytes(1000));
      }
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<a id=dl href="/f.bin" download="f.bin">f</a>');
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      await using session = await openSession({ ...env.remote, driver: 'puppeteer' });
      const { page } = session;
      // a download directory that cannot exist: under a regular file
      const blocker = join(local, 'a-file');
      writeFileSync(blocker, 'x');
      const cdp = await page.browser().target().createCDPSession();
      const states: string[] = [];
      cdp.on('Browser.downloadProgress', (e: { state: string }) => states.push(e.state));
      await cdp.send('Browser.setDownloadBehavior', {
        behavior: 'allow',
        downloadPath: join(blocker, 'downloads'),
        eventsEnabled: true,
      });
      const { port } = site.address() as AddressInfo;
      await page.goto(`http://127.0.0.1:${port}/`);
      const clicked = Date.now();
      await page.click('#dl');
      await eventually(() => states.includes('canceled'), 'the download canceled', 10_000);
      expect(Date.now() - clicked).toBeLessThan(10_000);
      expect(states).not.toContain('completed');
      const ours = warnings.filter(
        (w) => (w as { code?: string }).code === 'BURROW_DOWNLOAD_FAILED',
      );
      expect(ours).toHaveLength(1);
      expect(ours[0]!.message).toContain('"f.bin"');
      expect(ours[0]!.message).toMatch(/ENOTDIR|EEXIST/);
    } finally {
      process.off('warning', onWarning);
      site.close();
    }
  });

  it('the proxy refuses other paths and closes with the session', async () => {
    const session = await openSession({ ...env.remote, driver: 'puppeteer' });
    const url = session.browser.wsEndpoint();
    expect(await status(url)).toBe(101);
    expect(await status(url.replace(/\/[\w-]+\/devtools/, '/guess/devtools'))).toBe(404);
    await session.stop();
    expect(await status(url)).toBe('ECONNREFUSED');
  });

  it("a refusal of the instance's relay reaches the driver with its status and body", async () => {
    const client = new Burrow(env.remote);
    const instance = await client.instances.start({ instance_type: 'browser' });
    try {
      const { cdp_url } = await client.browser.cdpUrl(instance.id);
      const badToken = cdp_url.replace(/token=[^&]+/, 'token=wrong');
      const proxy = await TransferProxy.open({
        cdpUrl: badToken,
        ...transferSetup(client, instance.id),
      });
      try {
        const direct = await handshake(badToken);
        expect(direct.status).toBeGreaterThanOrEqual(400);
        expect(await handshake(proxy.url)).toEqual(direct);
      } finally {
        await proxy.close();
      }
    } finally {
      await client.instances.stop(instance.id);
      await client.close();
    }
  });
});
