/**
 * Auth states end to end with real Chromium: log in to a local site in one instance, save_auth,
 * authenticate a fresh instance, and the site sees the user logged in, through Playwright and
 * Puppeteer; modify_auth; the store survives a restart.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Page } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthStore } from '../../../src/server/auth-states/store.js';
import { HttpError } from '../../../src/server/errors.js';
import { instanceProcesses, startBrowser as startBrowserOn } from '../../helpers/server.js';
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

const startBrowser = () => startBrowserOn(server);
const stop = (id: string) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
const post = async (path: string) => {
  const res = await server.api(path, { method: 'POST' });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

async function status(page: Page) {
  await page.goto(`${site.origin}/me`);
  return { user: await page.textContent('#status'), session: await page.textContent('#session') };
}

describe('auth states', () => {
  let stateId: string;

  it('save_auth captures HttpOnly cookies, localStorage and sessionStorage', async () => {
    const { id, cdpUrl } = await startBrowser();
    const browser = await chromium.connectOverCDP(cdpUrl);
    const page = browser.contexts()[0]!.pages()[0]!;
    expect(await status(page)).toEqual({ user: 'Not logged in', session: 'none' });
    await page.goto(`${site.origin}/login`);
    await Promise.all([page.waitForURL(`${site.origin}/me`), page.click('#login')]);
    expect(await page.textContent('#status')).toBe('Logged in as alice');
    await page.goto(`${site.origin}/elsewhere`); // storage is read from the origin, not the page
    await browser.close();

    const saved = await post(`/v1/instance/${id}/browser/save_auth?name=site`);
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ status: 'success', name: 'site' });
    stateId = String(saved.body.auth_state_id);
    expect(stateId).toMatch(/^auth_[0-9a-f]{16}$/);

    const listed = (await (await server.api('/v1/auth_states')).json()) as unknown[];
    expect(listed).toContainEqual({ id: stateId, name: 'site' });

    const { data } = new AuthStore(server.dataDir).get(stateId);
    expect(data.cookies).toContainEqual(
      expect.objectContaining({ name: 'sid', domain: '127.0.0.1', httpOnly: true }),
    );
    expect(data.localStorage[site.origin]).toEqual({
      token: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(data.sessionStorage[site.origin]).toEqual({ greeting: 'hello alice' });
    const file = join(server.dataDir, 'auth-states', `${stateId}.json`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    await stop(id);
  });

  it('authenticate logs a fresh instance in, without disturbing its open page (Playwright)', async () => {
    const { id, cdpUrl } = await startBrowser();
    const browser = await chromium.connectOverCDP(cdpUrl);
    const context = browser.contexts()[0]!;
    const page = context.pages()[0]!;
    expect(await status(page)).toEqual({ user: 'Not logged in', session: 'none' });
    await page.goto(`${site.origin}/open`);
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));

    expect(await post(`/v1/instance/${id}/browser/authenticate?auth_state_id=${stateId}`)).toEqual({
      status: 200,
      body: { status: 'success' },
    });
    expect(context.pages()).toEqual([page]);
    expect(page.url()).toBe(`${site.origin}/open`);
    expect(await page.evaluate(() => (window as unknown as { marker: number }).marker)).toBe(42);

    // the open tab gets sessionStorage too; a new tab starts with none, as in any browser
    expect(await status(page)).toEqual({ user: 'Logged in as alice', session: 'hello alice' });
    expect(await status(await context.newPage())).toEqual({
      user: 'Logged in as alice',
      session: 'none',
    });
    await browser.close();
    await stop(id);
  });

  it('authenticate works for Puppeteer, and a state applied is captured again', async () => {
    const { id, cdpUrl } = await startBrowser();
    expect(
      (await post(`/v1/instance/${id}/browser/authenticate?auth_state_id=${stateId}`)).status,
    ).toBe(200);

    // saved before the site was ever opened here: the applied origins are remembered
    const resaved = await post(`/v1/instance/${id}/browser/save_auth`);
    expect(resaved.body).toMatchObject({ status: 'success', name: 'default' });
    const { data } = new AuthStore(server.dataDir).get(String(resaved.body.auth_state_id));
    expect(data.localStorage[site.origin]).toEqual(
      new AuthStore(server.dataDir).get(stateId).data.localStorage[site.origin],
    );
    expect(data.cookies.map((c) => c.name)).toContain('sid');

    const browser = await puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null });
    const [page] = await browser.pages();
    await page!.goto(`${site.origin}/me`);
    expect(await page!.$eval('#status', (el) => el.textContent)).toBe('Logged in as alice');
    expect(await page!.$eval('#session', (el) => el.textContent)).toBe('hello alice');
    await browser.disconnect();
    await stop(id);
  });

  it('modify_auth overwrites a state with the current browser data and renames it', async () => {
    const { id, cdpUrl } = await startBrowser();
    const saved = await post(`/v1/instance/${id}/browser/save_auth?name=before`);
    const savedId = String(saved.body.auth_state_id);
    expect(new AuthStore(server.dataDir).get(savedId).data.cookies).toEqual([]);

    await post(`/v1/instance/${id}/browser/authenticate?auth_state_id=${stateId}`);
    const browser = await chromium.connectOverCDP(cdpUrl);
    const page = browser.contexts()[0]!.pages()[0]!;
    await page.goto(`${site.origin}/`);
    await page.evaluate(() => localStorage.setItem('extra', 'yes'));
    await browser.close();

    const modified = await post(
      `/v1/instance/${id}/browser/modify_auth?auth_state_id=${savedId}&name=after`,
    );
    expect(modified).toEqual({
      status: 200,
      body: { status: 'success', auth_state_id: savedId, name: 'after' },
    });
    const state = new AuthStore(server.dataDir).get(savedId);
    expect(state.name).toBe('after');
    expect(state.data.localStorage[site.origin]).toMatchObject({ extra: 'yes' });
    expect(state.data.cookies.map((c) => c.name)).toContain('sid');

    const unknown = await post(`/v1/instance/${id}/browser/modify_auth?auth_state_id=auth_0000`);
    expect(unknown.status).toBe(404);
    await stop(id);
  });
});

describe('AuthStore', () => {
  it('persists states as 0600 files that a new store reads back', async () => {
    const dir = join(server.dataDir, 'store-test');
    const store = new AuthStore(dir);
    const data = { cookies: [{ name: 'a', value: '1' }], localStorage: {}, sessionStorage: {} };
    const first = await store.save(undefined, data);
    expect(first).toEqual({ id: expect.stringMatching(/^auth_[0-9a-f]{16}$/), name: 'default' });
    const second = await store.save('two', { ...data, cookies: [] });
    expect(await store.overwrite(first.id, { ...data, localStorage: { x: { k: 'v' } } })).toEqual({
      id: first.id,
      name: 'default',
    });

    const reopened = new AuthStore(dir);
    expect(reopened.list()).toEqual([first, second]);
    expect(reopened.get(first.id).data.localStorage).toEqual({ x: { k: 'v' } });
    expect(statSync(join(dir, 'auth-states', `${second.id}.json`)).mode & 0o777).toBe(0o600);
    expect(() => reopened.get('auth_ffffffffffffffff')).toThrow(HttpError);
    expect(() => reopened.get('../../etc/passwd')).toThrow(/not found/);
    await expect(reopened.overwrite('nope', data)).rejects.toMatchObject({ status: 404 });
  });
});
