/**
 * Auth states on the desktop browser of `ubuntu` instances: `authenticate` needs `browser/start`
 * first (COMPAT.md), a login saved from one desktop browser signs in another one, and the state
 * also moves between instance types (ubuntu → browser).
 */
import { chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';
import { startSite, type TestSite } from '../../helpers/site.js';

let server: TestServer;
let site: TestSite;
const started: string[] = [];
beforeAll(async () => {
  [server, site] = await Promise.all([testServer(), startSite()]);
});
afterAll(async () => {
  for (const id of started) await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

async function start(type: 'ubuntu' | 'browser'): Promise<string> {
  const res = await server.api('/v1/start', { json: { instance_type: type } });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  started.push(id);
  return id;
}
async function post(path: string) {
  const res = await server.api(path, { method: 'POST' });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
async function whoAmI(page: Page) {
  await page.goto(`${site.origin}/me`);
  return page.textContent('#status');
}

describe('auth states on the ubuntu desktop browser', () => {
  it('save on one desktop browser, apply on another ubuntu instance and on a browser instance', async () => {
    const a = await start('ubuntu');
    const { body: startA } = await post(`/v1/instance/${a}/browser/start`);
    const browserA = await chromium.connectOverCDP(String(startA.cdp_url));
    const pageA = browserA.contexts()[0]!.pages()[0] ?? (await browserA.contexts()[0]!.newPage());
    await pageA.goto(`${site.origin}/login`);
    await Promise.all([pageA.waitForURL(`${site.origin}/me`), pageA.click('#login')]);
    expect(await pageA.textContent('#status')).toBe('Logged in as alice');
    await browserA.close();

    const saved = await post(`/v1/instance/${a}/browser/save_auth?name=desktop`);
    expect(saved.body).toMatchObject({ status: 'success', name: 'desktop' });
    const stateId = String(saved.body.auth_state_id);

    const b = await start('ubuntu');
    const before = await post(`/v1/instance/${b}/browser/authenticate?auth_state_id=${stateId}`);
    expect(before.status).toBe(400);
    expect(String(before.body.detail)).toMatch(/browser is not running.*browser\/start/i);
    const { body: startB } = await post(`/v1/instance/${b}/browser/start`);
    const applied = await post(`/v1/instance/${b}/browser/authenticate?auth_state_id=${stateId}`);
    expect(applied).toEqual({ status: 200, body: { status: 'success' } });
    const browserB = await chromium.connectOverCDP(String(startB.cdp_url));
    const pageB = browserB.contexts()[0]!.pages()[0] ?? (await browserB.contexts()[0]!.newPage());
    expect(await whoAmI(pageB)).toBe('Logged in as alice');
    const current = await server.api(`/v1/instance/${b}/browser/current_url`);
    expect(await current.json()).toEqual({ current_url: `${site.origin}/me` });
    await browserB.close();

    const c = await start('browser');
    expect(
      (await post(`/v1/instance/${c}/browser/authenticate?auth_state_id=${stateId}`)).status,
    ).toBe(200);
    const { body: cdpC } = await post(`/v1/instance/${c}/browser/start`);
    const browserC = await chromium.connectOverCDP(String(cdpC.cdp_url));
    expect(await whoAmI(browserC.contexts()[0]!.pages()[0]!)).toBe('Logged in as alice');
    await browserC.close();
  });
});
