/**
 * `cdp_url` through the server's authenticated relay, with real Chromium: Playwright and
 * Puppeteer connect, disconnect and reconnect; bad tokens and paths are refused; current_url
 * and screenshots follow the active tab; browser/stop and browser/start.
 */
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handshakeStatus } from '../../helpers/handshake.js';
import { eventually, instancePids, instanceProcesses, pngSize } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';
import { startSite, type TestSite } from '../../helpers/site.js';

let site: TestSite;
beforeAll(async () => {
  site = await startSite();
});
afterAll(async () => {
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});
const server = useServer();

async function startBrowser(body: Record<string, unknown> = {}) {
  const res = await server.api('/v1/start', { json: { instance_type: 'browser', ...body } });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  return { id, cdpUrl: await cdpUrl(id) };
}
async function cdpUrl(id: string): Promise<string> {
  const res = await server.api(`/v1/instance/${id}/browser/cdp_url`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { cdp_url: string }).cdp_url;
}
async function currentUrl(id: string): Promise<string> {
  const res = await server.api(`/v1/instance/${id}/browser/current_url`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { current_url: string }).current_url;
}
async function screenshot(id: string): Promise<Buffer> {
  const res = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
  expect(res.status).toBe(200);
  return Buffer.from(((await res.json()) as { base64_image: string }).base64_image, 'base64');
}
const stop = (id: string) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' });

/**
 * Chromium browser processes (not its helpers) of the instance on its profile. Chromium runs in
 * the instance's sandbox, where every instance's profile has the same path: the instance's own
 * processes are its cgroup's members, and the profile is named as Chromium sees it.
 */
function browserProcesses(id: string): number[] {
  return instancePids(id).filter((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return (
        argv[0] === '/usr/lib/chromium/chromium' &&
        argv.includes('--user-data-dir=/home/user/.config/burrow-chromium/profile') &&
        !argv.some((a) => a.startsWith('--type='))
      );
    } catch {
      return false;
    }
  });
}

describe('cdp_url', () => {
  it('Playwright sees the default context and its page, and can reconnect', async () => {
    const { id, cdpUrl: url } = await startBrowser();
    expect(url).toMatch(
      new RegExp(
        `^ws://127\\.0\\.0\\.1:${server.port}/cdp/${id}/devtools/browser/[0-9a-f-]+\\?token=.+$`,
      ),
    );
    const started = await server.api(`/v1/instance/${id}/browser/start`, { method: 'POST' });
    expect(await started.json()).toEqual({ cdp_url: url });

    const first = await chromium.connectOverCDP(url);
    expect(first.contexts()).toHaveLength(1);
    const [page] = first.contexts()[0]!.pages();
    expect(page?.url()).toBe('about:blank');
    await page!.goto(`${site.origin}/one`);
    expect(await page!.title()).toBe('Page /one');
    await first.close(); // disconnects only

    expect(await currentUrl(id)).toBe(`${site.origin}/one`);
    const again = await chromium.connectOverCDP(url);
    const pages = again.contexts()[0]!.pages();
    expect(pages.map((p) => p.url())).toEqual([`${site.origin}/one`]);
    expect(await pages[0]!.evaluate(() => document.title)).toBe('Page /one');
    await again.close();
    await stop(id);
  });

  it('Puppeteer connects, drives the page and disconnects without closing the browser', async () => {
    const { id, cdpUrl: url } = await startBrowser();
    const browser = await puppeteer.connect({ browserWSEndpoint: url, defaultViewport: null });
    const pages = await browser.pages();
    expect(pages).toHaveLength(1);
    await pages[0]!.goto(`${site.origin}/two`);
    expect(await pages[0]!.$eval('#host', (el) => el.textContent)).toBe(
      `hello 127.0.0.1:${site.port}`,
    );
    await browser.disconnect();

    expect(await currentUrl(id)).toBe(`${site.origin}/two`);
    const again = await puppeteer.connect({ browserWSEndpoint: url, defaultViewport: null });
    expect((await again.pages()).map((p) => p.url())).toEqual([`${site.origin}/two`]);
    await again.disconnect();
    await stop(id);
  });

  it('refuses a wrong token and non-DevTools paths, and dies with the instance', async () => {
    const { id, cdpUrl: url } = await startBrowser();
    const wrongToken = url.replace(/token=.*$/, 'token=not-the-token');
    expect(await handshakeStatus(wrongToken)).toBe(401);
    expect(await handshakeStatus(url.replace(/devtools\/browser\/[^?]+/, 'json/version'))).toBe(
      404,
    );
    expect(
      await handshakeStatus(url.replace(/devtools\/browser\/[^?]+/, 'devtools/page/NOSUCHPAGE')),
    ).toBe(502);
    expect(await handshakeStatus(url)).toBe(101);

    const browser = await chromium.connectOverCDP(url);
    const disconnected = new Promise<void>((resolve) =>
      browser.once('disconnected', () => resolve()),
    );
    await stop(id);
    await disconnected; // the relay closed the live connection
    expect(await handshakeStatus(url)).toBe(410);
  });
});

describe('active tab', () => {
  it('current_url follows navigation, a new tab, a tab brought to front and a popup', async () => {
    const { id, cdpUrl: url } = await startBrowser();
    expect(await currentUrl(id)).toBe('about:blank');
    const browser = await chromium.connectOverCDP(url);
    const context = browser.contexts()[0]!;
    const first = context.pages()[0]!;
    await first.goto(`${site.origin}/a`);
    expect(await currentUrl(id)).toBe(`${site.origin}/a`);

    const second = await context.newPage();
    await second.goto(`${site.origin}/b`);
    expect(await currentUrl(id)).toBe(`${site.origin}/b`);

    await first.bringToFront();
    expect(await currentUrl(id)).toBe(`${site.origin}/a`);

    const [popup] = await Promise.all([
      context.waitForEvent('page'),
      first.evaluate((u) => window.open(u), `${site.origin}/c`),
    ]);
    await popup.waitForLoadState();
    expect(await currentUrl(id)).toBe(`${site.origin}/c`);

    await popup.close();
    await second.bringToFront();
    expect(await currentUrl(id)).toBe(`${site.origin}/b`);
    await browser.close();
    await stop(id);
  });

  it('screenshots are PNGs of exactly the resolution, in new tabs and windows too', async () => {
    const { id, cdpUrl: url } = await startBrowser({ resolution: [1024, 640] });
    expect(pngSize(await screenshot(id))).toEqual([1024, 640]);

    const browser = await chromium.connectOverCDP(url);
    const context = browser.contexts()[0]!;
    const viewport = () => [window.innerWidth, window.innerHeight];
    expect(await context.pages()[0]!.evaluate(viewport)).toEqual([1024, 640]);

    const tab = await context.newPage();
    await tab.goto(`${site.origin}/tab`);
    expect(await tab.evaluate(viewport)).toEqual([1024, 640]);
    expect(await currentUrl(id)).toBe(`${site.origin}/tab`);
    expect(pngSize(await screenshot(id))).toEqual([1024, 640]);

    const [popup] = await Promise.all([
      context.waitForEvent('page'),
      tab.evaluate((u) => window.open(u, '_blank', 'popup'), `${site.origin}/window`),
    ]);
    await popup.waitForLoadState();
    await eventually(
      async () => (await popup.evaluate(viewport)).join('x') === '1024x640',
      'the popup window to be fitted',
    );
    expect(await currentUrl(id)).toBe(`${site.origin}/window`);
    expect(pngSize(await screenshot(id))).toEqual([1024, 640]);
    await browser.close();
    await stop(id);
  });
});

describe('browser/stop and browser/start', () => {
  it('stop ends Chromium but not the instance; start launches a fresh one', async () => {
    const { id, cdpUrl: oldUrl } = await startBrowser();
    const [oldPid] = browserProcesses(id);
    expect(oldPid).toBeGreaterThan(0);

    const stopped = await server.api(`/v1/instance/${id}/browser/stop`, { method: 'POST' });
    expect(stopped.status).toBe(200);
    expect(browserProcesses(id)).toEqual([]);
    const inst = (await (await server.api(`/v1/instance/${id}`)).json()) as { status: string };
    expect(inst.status).toBe('running');
    const shot = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
    expect(shot.status).toBe(400);
    expect(await shot.json()).toEqual({ detail: 'The browser is not running; call browser/start' });
    expect(await handshakeStatus(oldUrl)).toBe(404);

    const started = await server.api(`/v1/instance/${id}/browser/start`, { method: 'POST' });
    const { cdp_url: newUrl } = (await started.json()) as { cdp_url: string };
    expect(newUrl).not.toBe(oldUrl);
    expect(browserProcesses(id)).toHaveLength(1);
    expect(browserProcesses(id)).not.toContain(oldPid);
    const browser = await chromium.connectOverCDP(newUrl);
    await browser.contexts()[0]!.pages()[0]!.goto(`${site.origin}/again`);
    expect(await currentUrl(id)).toBe(`${site.origin}/again`);
    await browser.close();
    await stop(id);
  });
});
