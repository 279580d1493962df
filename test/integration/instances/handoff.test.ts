/**
 * Hand-off to a person (issue 23): a browser instance is handed to a "person" (a local headless
 * Chromium driven by Playwright) through the hand-off URL. The person sees the message, types into
 * the remote page through the live view and presses Done; the script's long poll resolves. An
 * expired hand-off, the token rules (wrong, missing, used) and a stop that cancels are checked too.
 */
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow, NotFoundError } from '../../../src/client/index.js';
import { handshakeStatus } from '../../helpers/handshake.js';
import { LAYOUT, PageProbe, startPlayground, type Playground } from '../../helpers/computer.js';
import {
  eventually,
  instanceProcesses,
  testServer,
  type TestServer,
} from '../../helpers/server.js';

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--no-first-run'];

let server: TestServer;
let site: Playground;
let person: Browser;
let client: Burrow;

beforeAll(async () => {
  [server, site, person] = await Promise.all([
    testServer(),
    startPlayground(),
    chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: CHROMIUM_ARGS }),
  ]);
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
});
afterAll(async () => {
  await client?.close();
  await person?.close();
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

async function startBrowser(): Promise<{ id: string; page: PageProbe }> {
  const inst = await client.instances.start({ instance_type: 'browser', resolution: [800, 600] });
  const { cdp_url } = await client.browser.cdpUrl(inst.id);
  return { id: inst.id, page: await PageProbe.open(cdp_url, site.url) };
}

describe('hand-off to a person', () => {
  it('shows the message, passes input through, and Done ends the wait', async () => {
    const { id, page } = await startBrowser();
    const h = await client.instances.handoff(id, {
      message: 'Enter the <code> from your phone',
      timeout_seconds: 300,
    });
    expect(h.status).toBe('pending');
    expect(Date.parse(h.expires_at) - Date.now()).toBeGreaterThan(290_000);
    const url = new URL(h.url!);
    // a token of its own, not the instance's live-view token
    const { stream_url } = await client.instance.streamUrl(id);
    const own = new URL(stream_url).searchParams.get('token');
    expect(url.searchParams.get('token')).not.toBe(own);
    expect(url.searchParams.get('token')!.length).toBeGreaterThan(20);

    // the script waits; nothing has happened yet
    expect(
      (await client.instances.handoffStatus(id, h.handoff_id, { wait_seconds: 1 })).status,
    ).toBe('pending');
    const waiting = client.instances.handoffStatus(id, h.handoff_id, { wait_seconds: 60 });

    const tab = await person.newPage({ viewport: { width: 1000, height: 760 } });
    await tab.goto(url.href);
    // the message is shown as text, not markup
    await expect
      .poll(() => tab.locator('#burrow-handoff-message').textContent())
      .toBe('Enter the <code> from your phone');
    await tab.waitForSelector('body[data-frames]', { timeout: 30_000 });

    const box = (await tab.locator('canvas').boundingBox())!;
    const at = (x: number, y: number) =>
      [box.x + (x * box.width) / 800, box.y + (y * box.height) / 600] as const;
    await tab.mouse.click(...at(LAYOUT.field.x + 50, LAYOUT.field.y + 15));
    await tab.keyboard.type('424242');
    await eventually(async () => (await page.state()).value === '424242', 'the typed code');

    await tab.locator('#burrow-handoff-done').click();
    const done = await waiting;
    expect(done).toMatchObject({ handoff_id: h.handoff_id, status: 'done' });
    expect(done.ended_at).toBeTruthy();
    await expect
      .poll(() => tab.locator('#burrow-handoff-message').textContent())
      .toMatch(/Thank you/);

    // the token is spent: the page, its socket and Done again are refused; the instance runs on
    const ws = `ws://${url.host}/stream/${id}/ws?token=${url.searchParams.get('token')}`;
    expect((await fetch(url)).status).toBe(401);
    expect(await handshakeStatus(ws)).toBe(401);
    const again = await fetch(`${url.origin}/stream/${id}/handoff/done${url.search}`, {
      method: 'POST',
    });
    expect(again.status).toBe(401);
    expect((await client.instances.get(id)).status).toBe('running');
    // the instance's own token does not end a hand-off
    const byOwn = await fetch(`${url.origin}/stream/${id}/handoff/done?token=${own}`, {
      method: 'POST',
    });
    expect(byOwn.status).toBe(401);
    await tab.close();
    page.close();
    await client.instances.stop(id);
  });

  it('an ubuntu instance: noVNC opens with the hand-off token, the banner sits over it', async () => {
    const inst = await client.instances.start({ instance_type: 'ubuntu' });
    const h = await client.instances.handoff(inst.id, { message: 'Over to you' });
    const url = new URL(h.url!);
    const tab = await person.newPage({ viewport: { width: 1024, height: 800 } });
    const failed: string[] = [];
    tab.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    await tab.goto(url.href);
    await tab.waitForSelector('body[data-connected="true"]', { timeout: 30_000 });
    expect(failed).toEqual([]); // every noVNC module came with the hand-off's token
    expect(await tab.locator('#burrow-handoff-message').textContent()).toBe('Over to you');
    const closed = tab.waitForSelector('body:not([data-connected="true"])', { timeout: 20_000 });
    await tab.locator('#burrow-handoff-done').click();
    expect((await client.instances.handoffStatus(inst.id, h.handoff_id)).status).toBe('done');
    await closed; // the VNC socket of the hand-off was closed with it
    const ws = `ws://${url.host}/stream/${inst.id}/websockify?token=${url.searchParams.get('token')}`;
    expect(await handshakeStatus(ws)).toBe(401);
    await tab.close();
    await client.instances.stop(inst.id);
  });

  it('expires, refuses wrong and missing tokens, and is cancelled by a stop', async () => {
    const { id, page } = await startBrowser();
    page.close();
    const h = await client.instances.handoff(id, { message: 'Solve it', timeout_seconds: 2 });
    const url = new URL(h.url!);
    const base = `${url.origin}${url.pathname}`;
    expect((await fetch(url)).status).toBe(200);
    expect((await fetch(`${base}?token=wrong`)).status).toBe(401);
    expect((await fetch(base)).status).toBe(401);
    expect(await handshakeStatus(`ws://${url.host}/stream/${id}/ws?token=wrong`)).toBe(401);
    // a hand-off token does not open the CDP relay
    const cdpToken = url.searchParams.get('token');
    expect(
      await handshakeStatus(`ws://${url.host}/cdp/${id}/devtools/browser?token=${cdpToken}`),
    ).toBe(401);

    const ended = await client.instances.handoffStatus(id, h.handoff_id, { wait_seconds: 30 });
    expect(ended.status).toBe('expired');
    expect((await fetch(url)).status).toBe(401);

    // unknown ids: 404 naming it
    const err = await client.instances.handoffStatus(id, 'ho_nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as Error).message).toContain('ho_nope');
    const res = await server.api(`/v1/instance/inst_nope/handoff/${h.handoff_id}`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: 'Instance inst_nope not found' });

    // bad input: a clear 422 naming the field
    const bad = await server.api(`/v1/instance/${id}/handoff`, { json: { timeout_seconds: 5 } });
    expect(bad.status).toBe(422);
    expect(JSON.stringify(await bad.json())).toContain('message');

    // a stop cancels what is pending, and wakes the waiter
    const second = await client.instances.handoff(id, { message: 'Again' });
    const waiting = client.instances.handoffStatus(id, second.handoff_id, { wait_seconds: 60 });
    await new Promise((r) => setTimeout(r, 300));
    await client.instances.stop(id);
    expect((await waiting).status).toBe('cancelled');
    expect((await fetch(second.url!)).status).toBeGreaterThanOrEqual(400);
  });
});
