/**
 * `blocked_domains`: the host and every subdomain are refused, everything else loads. The
 * refusal happens at the instance's egress: a blocked name never reaches the network (the test
 * site never sees a request for it), and a navigation fails as blocked (`net::ERR_BLOCKED_BY_CLIENT`)
 * where a request the browser makes otherwise gets the egress's 403.
 */
import { chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceProcesses } from '../../helpers/server.js';
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

/**
 * Open `host` on the test site in a new tab: its `#host` text, `refused (<status>)` when the
 * egress answered instead of the site, or the navigation error.
 */
async function visit(page: Page, host: string): Promise<string> {
  const tab = await page.context().newPage();
  try {
    const res = await tab.goto(`http://${host}:${site.port}/`);
    if (res && res.status() !== 200) return `refused (${res.status()})`;
    return (await tab.textContent('#host')) ?? '';
  } catch (err) {
    return (err as Error).message.split('\n')[0]!;
  } finally {
    await tab.close();
  }
}

/** A no-cors fetch of the test site through `host`, from the page's document. */
function fetchFrom(page: Page, host: string): Promise<string> {
  return page.evaluate(
    (url) =>
      fetch(url, { mode: 'no-cors' }).then(
        () => 'ok',
        () => 'refused',
      ),
    `http://${host}:${site.port}/`,
  );
}

async function withBrowser<T>(blocked: string[], fn: (page: Page) => Promise<T>): Promise<T> {
  const res = await server.api('/v1/start', {
    json: { instance_type: 'browser', blocked_domains: blocked },
  });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  const { cdp_url } = (await (await server.api(`/v1/instance/${id}/browser/cdp_url`)).json()) as {
    cdp_url: string;
  };
  const browser = await chromium.connectOverCDP(cdp_url);
  try {
    return await fn(browser.contexts()[0]!.pages()[0]!);
  } finally {
    await browser.close();
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }
}

describe('blocked_domains', () => {
  it('refuses the domain, its subdomains and their trailing-dot spellings', async () => {
    await withBrowser(['Localhost'], async (page) => {
      const blocked = ['localhost', 'sub.localhost', 'a.b.localhost', 'localhost.', 'x.localhost.'];
      for (const host of blocked) {
        expect(await visit(page, host), host).toContain('net::ERR_BLOCKED_BY_CLIENT');
      }
      expect(await visit(page, '127.0.0.1')).toBe(`hello 127.0.0.1:${site.port}`);
      // nor can a page fetch from it: its request never leaves the instance
      await page.goto(`${site.origin}/`);
      await fetchFrom(page, 'sub.localhost');
      expect(await fetchFrom(page, '127.0.0.1')).toBe('ok');
      const reached = site.hosts.filter((h) => /localhost/i.test(h));
      expect(reached).toEqual([]);
    });
  });

  it('leaves hosts that are not blocked alone', async () => {
    await withBrowser([], async (page) => {
      expect(await visit(page, 'localhost')).toBe(`hello localhost:${site.port}`);
      expect(await visit(page, 'sub.localhost')).toBe(`hello sub.localhost:${site.port}`);
      await page.goto(`${site.origin}/`);
      expect(await fetchFrom(page, 'sub.localhost')).toBe('ok');
    });
  });
});
