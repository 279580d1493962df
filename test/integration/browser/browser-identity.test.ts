/**
 * Devices and identity end to end: a browser instance started with `device`, `locale`,
 * `timezone_id`, `geolocation` (and `user_agent`) shows them to a site on 127.0.0.1, in what
 * the page's first script sees (navigator, Intl, matchMedia, screen) and in the request headers
 * the site got (User-Agent, Accept-Language, Sec-CH-UA*), checked through `cdp_url` with
 * Playwright in the default context and in a `browser.newContext()`, and with Puppeteer. Unknown
 * devices and time zones are 422s naming them.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, devices, type Browser, type Page } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Burrow } from '../../../src/client/index.js';
import { InvalidRequestError } from '../../../src/client/index.js';
import { openSession } from '../../../src/index.js';
import { instanceProcesses } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

let client: Burrow;
let site: Server;
let origin = '';

/** The page's first script reports what it sees; the site adds the headers it got. */
const REPORT = `<!doctype html><html><head><title>report</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><script>
  window.seen = {
    userAgent: navigator.userAgent,
    platform: navigator.platform,
    maxTouchPoints: navigator.maxTouchPoints,
    language: navigator.language,
    languages: navigator.languages,
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    intlLocale: Intl.NumberFormat().resolvedOptions().locale,
    coarse: matchMedia('(pointer: coarse)').matches,
    width: innerWidth,
    screenWidth: screen.width,
    dpr: devicePixelRatio,
    uaDataMobile: navigator.userAgentData ? navigator.userAgentData.mobile : null,
    uaDataPlatform: navigator.userAgentData ? navigator.userAgentData.platform : null,
    headers: HEADERS,
  };
</script></head><body>report</body></html>`;

beforeAll(async () => {
  site = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', 'accept-ch': 'Sec-CH-UA-Platform' });
    res.end(REPORT.replace('HEADERS', JSON.stringify(req.headers)));
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await new Promise((r) => site?.close(r));
  expect(instanceProcesses()).toEqual([]);
});

const server = useServer({}, { timeout: 60_000, client: { maxRetries: 0 } });
beforeAll(() => {
  client = server.client;
});

interface Seen {
  userAgent: string;
  platform: string;
  maxTouchPoints: number;
  language: string;
  languages: string[];
  timeZone: string;
  intlLocale: string;
  coarse: boolean;
  width: number;
  screenWidth: number;
  dpr: number;
  uaDataMobile: boolean | null;
  uaDataPlatform: string | null;
  headers: Record<string, string>;
}

const pixel = devices['Pixel 5']!;

async function report(page: Page, path: string): Promise<Seen> {
  await page.goto(`${origin}${path}`);
  return page.evaluate(() => (window as unknown as { seen: Seen }).seen);
}

/** What every page of an instance started as a Pixel 5 in Berlin speaking German sees. */
function expectIdentity(seen: Seen, opts: { metrics: boolean }): void {
  expect(seen.userAgent).toBe(pixel.userAgent);
  expect(seen.platform).toBe('Linux armv81');
  expect(seen.headers['user-agent']).toBe(pixel.userAgent);
  expect(seen.language).toBe('de-DE');
  expect(seen.languages[0]).toBe('de-DE');
  expect(seen.headers['accept-language']).toMatch(/^de-DE/);
  expect(seen.intlLocale).toBe('de-DE');
  expect(seen.timeZone).toBe('Europe/Berlin');
  expect(seen.uaDataMobile).toBe(true);
  expect(seen.uaDataPlatform).toBe('Android');
  expect(seen.headers['sec-ch-ua-mobile']).toBe('?1');
  expect(seen.headers['sec-ch-ua-platform']).toBe('"Android"');
  if (opts.metrics) {
    expect(seen.width).toBe(pixel.viewport.width);
    expect(seen.dpr).toBe(pixel.deviceScaleFactor);
    expect(seen.maxTouchPoints).toBeGreaterThan(0);
    expect(seen.coarse).toBe(true);
  }
}

describe('devices and identity', () => {
  it('apply to the default context and to contexts clients create, before the first script', async () => {
    const inst = await client.instances.start({
      instance_type: 'browser',
      device: 'Pixel 5',
      locale: 'de-DE',
      timezone_id: 'Europe/Berlin',
      geolocation: { latitude: 52.52, longitude: 13.405, accuracy: 10 },
    });
    let browser: Browser | undefined;
    try {
      const { cdp_url } = await client.browser.cdpUrl(inst.id);
      browser = await chromium.connectOverCDP(cdp_url);
      const page = await browser.contexts()[0]!.newPage();
      expectIdentity(await report(page, '/default'), { metrics: true });
      // geolocation: granted, at the given place
      const position = await page.evaluate(
        () =>
          new Promise<number[]>((resolve, reject) =>
            navigator.geolocation.getCurrentPosition(
              (p) => resolve([p.coords.latitude, p.coords.longitude]),
              (e) => reject(new Error(e.message)),
            ),
          ),
      );
      expect(position).toEqual([52.52, 13.405]);

      // a context of the client's own: its pages get the identity too (Playwright sets its
      // own default viewport there, and wins for the metrics)
      const context = await browser.newContext();
      const other = await context.newPage();
      expectIdentity(await report(other, '/new-context'), { metrics: false });
      await context.close();
      // …and without a viewport of its own, the device's metrics hold there as well
      const bare = await browser.newContext({ viewport: null });
      expectIdentity(await report(await bare.newPage(), '/bare'), { metrics: true });
      await bare.close();
    } finally {
      await browser?.close().catch(() => {});
      await client.instances.stop(inst.id);
    }
  }, 180_000);

  it('reach Puppeteer pages, and user_agent overrides the device', async () => {
    const ua =
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 burrow-test';
    const inst = await client.instances.start({
      instance_type: 'browser',
      user_agent: ua,
      locale: 'fr-FR',
      timezone_id: 'Asia/Tokyo',
    });
    try {
      const { cdp_url } = await client.browser.cdpUrl(inst.id);
      const browser = await puppeteer.connect({ browserWSEndpoint: cdp_url });
      try {
        const context = await browser.createBrowserContext();
        const page = await context.newPage();
        await page.goto(`${origin}/puppeteer`);
        const seen = (await page.evaluate('window.seen')) as Seen;
        expect(seen.userAgent).toBe(ua);
        expect(seen.headers['user-agent']).toBe(ua);
        expect(seen.platform).toBe('Win32');
        expect(seen.uaDataPlatform).toBe('Windows');
        expect(seen.headers['sec-ch-ua-platform']).toBe('"Windows"');
        expect(seen.language).toBe('fr-FR');
        expect(seen.headers['accept-language']).toMatch(/^fr-FR/);
        expect(seen.timeZone).toBe('Asia/Tokyo');
        expect(seen.coarse).toBe(false);
      } finally {
        await browser.disconnect();
      }
    } finally {
      await client.instances.stop(inst.id);
    }
  }, 180_000);

  it('come through the bridge: openSession({ device, locale, timezoneId, geolocation })', async () => {
    await using session = await openSession({
      client,
      device: 'Pixel 5',
      locale: 'de-DE',
      timezoneId: 'Europe/Berlin',
      geolocation: { latitude: 48.1, longitude: 11.6 },
    });
    const context = await session.browser.newContext({ viewport: null });
    const page = await context.newPage();
    expectIdentity(await report(page, '/bridge'), { metrics: true });
    const granted = await page.evaluate(async () => {
      const status = await navigator.permissions.query({ name: 'geolocation' });
      return status.state;
    });
    expect(granted).toBe('granted');
  }, 180_000);

  it('refuse an unknown device and a bad time zone with 422s naming them', async () => {
    const start = (body: object) =>
      fetch(`${server.url}/v1/start`, {
        method: 'POST',
        headers: { 'x-api-key': server.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const device = await start({ instance_type: 'browser', device: 'Pixel 55' });
    expect(device.status).toBe(422);
    const deviceText = await device.text();
    expect(deviceText).toContain('unknown device \\"Pixel 55\\"');
    expect(deviceText).toContain('\\"Pixel 5\\"');
    const zone = await start({ instance_type: 'browser', timezone_id: 'Mars/Olympus' });
    expect(zone.status).toBe(422);
    expect(await zone.text()).toContain('Mars/Olympus');
    const locale = await start({ instance_type: 'browser', locale: 'not a locale!' });
    expect(locale.status).toBe(422);
    // on a desktop instance: 400 naming the options
    const ubuntu = await start({ instance_type: 'ubuntu', locale: 'de-DE' });
    expect(ubuntu.status).toBe(400);
    expect(await ubuntu.text()).toContain('browser instances only');
    // the typed client checks the request against the same schema before sending it
    const local = await client.instances
      .start({ instance_type: 'browser', device: 'Pixel 55' })
      .catch((e: unknown) => e);
    expect(local).toBeInstanceOf(InvalidRequestError);
    expect((local as Error).message).toContain('Pixel 55');
  });
});
