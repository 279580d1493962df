/**
 * The live view of a browser instance (`stream_url`), opened in a real headless browser: the
 * CDP screencast shows the active tab, mouse and keyboard sent through the page reach it, and
 * wrong or expired tokens are refused.
 */
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handshakeStatus } from '../../helpers/handshake.js';
import {
  eventually,
  instanceProcesses,
  pidsMatching,
  testServer,
  type TestServer,
} from '../../helpers/server.js';
import { LAYOUT, PageProbe, startPlayground, type Playground } from '../../helpers/computer.js';

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

let server: TestServer;
let site: Playground;
let viewer: Browser;

beforeAll(async () => {
  [server, site, viewer] = await Promise.all([
    testServer(),
    startPlayground(),
    chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: CHROMIUM_ARGS }),
  ]);
});
afterAll(async () => {
  await viewer?.close();
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

async function startBrowser(): Promise<{ id: string; page: PageProbe }> {
  const res = await server.api('/v1/start', {
    json: { instance_type: 'browser', resolution: [800, 600] },
  });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  const cdp = await server.api(`/v1/instance/${id}/browser/cdp_url`);
  const page = await PageProbe.open(((await cdp.json()) as { cdp_url: string }).cdp_url, site.url);
  return { id, page };
}

async function streamUrl(id: string): Promise<string> {
  const res = await server.api(`/v1/instance/${id}/stream_url`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { stream_url: string }).stream_url;
}

describe('browser instance live view', () => {
  it('shows the active tab and forwards mouse and keyboard to it', async () => {
    const { id, page } = await startBrowser();
    const url = await streamUrl(id);
    expect(url).toMatch(new RegExp(`^${server.url}/stream/${id}/\\?token=[\\w-]+$`));

    const tab = await viewer.newPage({ viewport: { width: 1000, height: 700 } });
    await tab.goto(url);
    await tab.waitForSelector('body[data-frames]', { timeout: 20_000 });
    const pixels = await tab.evaluate(() => {
      const c = document.querySelector('canvas')!;
      const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let green = 0;
      let other = 0;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i]! < 40 && d[i + 1]! > 120 && d[i + 2]! < 40) green++;
        else if (d[i] !== 255 || d[i + 1] !== 255 || d[i + 2] !== 255) other++;
      }
      return { width: c.width, height: c.height, green, other };
    });
    expect([pixels.width, pixels.height]).toEqual([800, 600]);
    expect(pixels.green).toBeGreaterThan(LAYOUT.go.w * LAYOUT.go.h * 0.5); // the button is there

    // canvas pixel = page pixel × displayed size / 800
    const box = (await tab.locator('canvas').boundingBox())!;
    const at = (x: number, y: number) =>
      [box.x + (x * box.width) / 800, box.y + (y * box.height) / 600] as const;
    await tab.mouse.click(...at(LAYOUT.go.x + 80, LAYOUT.go.y + 30));
    await eventually(async () => (await page.state()).clicks === 1, 'the click to reach the page');
    await tab.mouse.click(...at(LAYOUT.field.x + 50, LAYOUT.field.y + 15));
    await tab.keyboard.type('Live view!');
    await eventually(
      async () => (await page.state()).value === 'Live view!',
      'typed text in the field',
    );
    await tab.keyboard.press('Control+A');
    await tab.keyboard.press('Backspace');
    await eventually(
      async () => (await page.state()).value === '',
      'ctrl+a, backspace to clear the field',
    );

    // the screencast keeps up with the page
    const frames = Number(await tab.evaluate(() => document.body.dataset.frames));
    await page.eval(`document.body.style.background = 'rgb(250, 200, 0)'`);
    await tab.waitForFunction((n) => Number(document.body.dataset.frames) > n, frames);

    // a viewer that connects later gets the last frame at once
    const late = await viewer.newPage();
    await late.goto(url);
    await late.waitForSelector('body[data-frames]', { timeout: 10_000 });
    await late.close();

    // computer actions and the live view share the pointer
    const res = await server.api(`/v1/instance/${id}/computer`, {
      json: { action: 'get_cursor_position', screenshot: false },
    });
    expect(await res.json()).toEqual({
      output: `X=${LAYOUT.field.x + 50},Y=${LAYOUT.field.y + 15}`,
    });
    await tab.close();
    page.close();
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  });

  it('refuses a wrong token, and the token dies with the instance', async () => {
    const { id, page } = await startBrowser();
    page.close();
    const url = new URL(await streamUrl(id));
    const ws = `ws://${url.host}/stream/${id}/ws`;
    const token = url.searchParams.get('token')!;

    expect((await fetch(`${url.origin}${url.pathname}?token=wrong`)).status).toBe(401);
    expect((await fetch(`${url.origin}${url.pathname}`)).status).toBe(401);
    expect(await handshakeStatus(`${ws}?token=wrong`)).toBe(401);
    expect(await handshakeStatus(`${ws}?token=${token}`)).toBe(101);
    expect((await fetch(url)).status).toBe(200);

    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    expect((await fetch(url)).status).toBeGreaterThanOrEqual(400);
    expect(await handshakeStatus(`${ws}?token=${token}`)).toBeGreaterThanOrEqual(400);
    // the stop answered once the instance was unusable; its processes go right after
    await eventually(() => pidsMatching(id).length === 0, 'the instance processes to exit');
  });
});
