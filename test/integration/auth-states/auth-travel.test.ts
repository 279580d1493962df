/**
 * Auth states that travel (issue 12 §4), with real Chromium: a login kept only in IndexedDB (the
 * Firebase way, test/helpers/idb-site.ts) survives save_auth → fresh instance → authenticate; a
 * state saved in burrow loads into a local Playwright `browser.newContext({ storageState })`; a
 * state saved by a local Playwright (`context.storageState({ indexedDB: true })`) imports into
 * burrow and signs a remote browser in; delete; import by name replaces the one state of that
 * name and refuses an ambiguous one. The desktop browser of an ubuntu instance shares the code:
 * it gets the same round trip.
 */
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthStore } from '../../../src/server/auth-states/store.js';
import { EXTRA_OK, startIdbSite, type IdbSite } from '../../helpers/idb-site.js';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';

let server: TestServer;
let site: IdbSite;
let local: Browser;
const started: string[] = [];

beforeAll(async () => {
  [server, site, local] = await Promise.all([
    testServer(),
    startIdbSite(),
    // a local browser, as a user's own Playwright would launch (root needs --no-sandbox)
    chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: ['--no-sandbox'] }),
  ]);
}, 60_000);
afterAll(async () => {
  await local?.close();
  for (const id of started) await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

async function start(type: 'browser' | 'ubuntu' = 'browser'): Promise<{ id: string; cdp: string }> {
  const res = await server.api('/v1/start', { json: { instance_type: type } });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  started.push(id);
  const url = await post(`/v1/instance/${id}/browser/start`);
  return { id, cdp: String(url.body.cdp_url) };
}
async function post(path: string, json?: unknown) {
  const res = await server.api(path, { method: 'POST', ...(json !== undefined && { json }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
const stop = (id: string) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' });

async function home(page: Page) {
  await page.goto(`${site.origin}/`);
  await page.waitForFunction(() => document.getElementById('status')?.textContent !== '…');
  return { status: await page.textContent('#status'), extra: await page.textContent('#extra') };
}
async function logIn(page: Page) {
  await page.goto(`${site.origin}/login`);
  await page.waitForFunction(
    () => document.getElementById('status')?.textContent === 'Signed in as alice',
  );
}
const firstPage = async (b: Browser) =>
  b.contexts()[0]!.pages()[0] ?? (await b.contexts()[0]!.newPage());

const SIGNED_IN = { status: 'Signed in as alice', extra: EXTRA_OK };
const SIGNED_OUT = { status: 'Signed out', extra: 'none' };

describe('an IndexedDB login travels', () => {
  let stateId = '';

  it('save_auth captures IndexedDB; authenticate on a fresh instance signs it in', async () => {
    const a = await start();
    const ba = await chromium.connectOverCDP(a.cdp);
    const pa = await firstPage(ba);
    expect(await home(pa)).toEqual(SIGNED_OUT);
    await logIn(pa);
    expect(await home(pa)).toEqual(SIGNED_IN);
    await pa.goto(`${site.origin}/elsewhere`);
    await ba.close();
    const saved = await post(`/v1/instance/${a.id}/browser/save_auth?name=idb`);
    expect(saved.status).toBe(200);
    stateId = String(saved.body.auth_state_id);
    await stop(a.id);

    // what was kept: Firebase's record as plain JSON, the extras record encoded
    const { data } = new AuthStore(server.dataDir).get(stateId);
    expect(data.cookies).toEqual([]);
    expect(data.localStorage).toEqual({});
    const [db] = data.indexedDB?.[site.origin] ?? [];
    expect(db).toMatchObject({ name: 'firebaseLocalStorageDb', version: 1 });
    const fb = db!.stores.find((s) => s.name === 'firebaseLocalStorage')!;
    expect(fb).toMatchObject({ keyPath: 'fbase_key', autoIncrement: false, indexes: [] });
    expect(fb.records).toEqual([
      {
        value: expect.objectContaining({
          fbase_key: 'firebase:authUser:AIzaTest:[DEFAULT]',
          value: expect.objectContaining({
            stsTokenManager: expect.objectContaining({
              accessToken: expect.stringMatching(/^[0-9a-f]{32}$/),
            }),
          }),
        }),
      },
    ]);
    const extras = db!.stores.find((s) => s.name === 'extras')!;
    expect(extras.indexes).toEqual([
      { name: 'by_kind', keyPath: 'kind', multiEntry: false, unique: false },
    ]);
    expect(extras.records[0]).toEqual({
      keyEncoded: { d: '2020-05-06T00:00:00.000Z' },
      valueEncoded: expect.objectContaining({ o: expect.any(Array) }),
    });

    const b = await start();
    const bb = await chromium.connectOverCDP(b.cdp);
    const pb = await firstPage(bb);
    expect(await home(pb)).toEqual(SIGNED_OUT);
    expect(
      (await post(`/v1/instance/${b.id}/browser/authenticate?auth_state_id=${stateId}`)).status,
    ).toBe(200);
    expect(await home(pb)).toEqual(SIGNED_IN);

    // applying again over the database now open in that origin replaces it in place
    expect(
      (await post(`/v1/instance/${b.id}/browser/authenticate?auth_state_id=${stateId}`)).status,
    ).toBe(200);
    expect(await home(pb)).toEqual(SIGNED_IN);
    await bb.close();
    await stop(b.id);
  });

  it('GET storage_state loads into a local Playwright context, signed in through IndexedDB', async () => {
    const res = await server.api(`/v1/auth_states/${stateId}/storage_state`);
    expect(res.status).toBe(200);
    const storageState = (await res.json()) as {
      cookies: unknown[];
      origins: { origin: string; localStorage: unknown[]; indexedDB: unknown[] }[];
    };
    expect(storageState.cookies).toEqual([]);
    expect(storageState.origins).toEqual([
      {
        origin: site.origin,
        localStorage: [],
        indexedDB: [expect.objectContaining({ name: 'firebaseLocalStorageDb' })],
      },
    ]);

    const context = await local.newContext({ storageState: storageState as never });
    expect(await home(await context.newPage())).toEqual(SIGNED_IN);
    // and Playwright reads it back the same way
    const again = await context.storageState({ indexedDB: true });
    expect(again.origins).toEqual(storageState.origins);
    await context.close();

    const none = await server.api('/v1/auth_states/auth_0000000000000000/storage_state');
    expect(none.status).toBe(404);
    expect(none.headers.get('x-burrow-error')).toBe('auth_state_not_found');
  });

  it('a state saved by a local Playwright imports into burrow and signs a remote browser in', async () => {
    const context = await local.newContext();
    const page = await context.newPage();
    await logIn(page);
    const storageState = await context.storageState({ indexedDB: true });
    await context.close();

    const imported = await post('/v1/auth_states/import?name=from-local', storageState);
    expect(imported).toEqual({
      status: 200,
      body: { auth_state_id: expect.stringMatching(/^auth_[0-9a-f]{16}$/), name: 'from-local' },
    });
    const id = String(imported.body.auth_state_id);

    const c = await start();
    expect(
      (await post(`/v1/instance/${c.id}/browser/authenticate?auth_state_id=${id}`)).status,
    ).toBe(200);
    const bc = await chromium.connectOverCDP(c.cdp);
    expect(await home(await firstPage(bc))).toEqual(SIGNED_IN);
    await bc.close();
    await stop(c.id);
  });

  it('the ubuntu desktop browser saves and restores IndexedDB too', async () => {
    const u = await start('ubuntu');
    expect(
      (await post(`/v1/instance/${u.id}/browser/authenticate?auth_state_id=${stateId}`)).status,
    ).toBe(200);
    const bu = await chromium.connectOverCDP(u.cdp);
    const pu = await firstPage(bu);
    expect(await home(pu)).toEqual(SIGNED_IN);
    await bu.close();
    const saved = await post(`/v1/instance/${u.id}/browser/save_auth?name=desktop-idb`);
    const { data } = new AuthStore(server.dataDir).get(String(saved.body.auth_state_id));
    expect(data.indexedDB?.[site.origin]?.[0]?.name).toBe('firebaseLocalStorageDb');
    await stop(u.id);
  });

  it('a tab holding an incompatible database open: 409 naming it, then a retry works', async () => {
    const d = await start();
    const bd = await chromium.connectOverCDP(d.cdp);
    const pd = await firstPage(bd);
    await pd.goto(`${site.origin}/elsewhere`);
    // the app holds version 5 of the database open and ignores requests to close it
    await pd.evaluate(
      () =>
        new Promise<void>((resolve, reject) => {
          const r = indexedDB.open('firebaseLocalStorageDb', 5);
          r.onupgradeneeded = () => r.result.createObjectStore('other');
          r.onsuccess = () => {
            (window as unknown as { held: IDBDatabase }).held = r.result;
            resolve();
          };
          r.onerror = () => reject(r.error);
        }),
    );
    const refused = await server.api(
      `/v1/instance/${d.id}/browser/authenticate?auth_state_id=${stateId}`,
      { method: 'POST' },
    );
    expect(refused.status).toBe(409);
    expect(refused.headers.get('x-burrow-error')).toBe('auth_state_not_applied');
    expect(((await refused.json()) as { detail: string }).detail).toContain(
      `IndexedDB database "firebaseLocalStorageDb" of ${site.origin} is held open by a tab`,
    );

    await pd.evaluate(() => (window as unknown as { held: IDBDatabase }).held.close());
    expect(
      (await post(`/v1/instance/${d.id}/browser/authenticate?auth_state_id=${stateId}`)).status,
    ).toBe(200);
    expect(await home(pd)).toEqual(SIGNED_IN);
    await bd.close();
    await stop(d.id);
  });

  it('import by name replaces the one state of that name; several of one name are refused; delete', async () => {
    const state = {
      cookies: [{ name: 'k', value: 'v', domain: '127.0.0.1', path: '/' }],
      origins: [],
    };
    const first = await post('/v1/auth_states/import?name=twice', state);
    const second = await post('/v1/auth_states/import?name=twice', {
      ...state,
      cookies: [{ ...state.cookies[0], value: 'v2' }],
    });
    expect(second.body.auth_state_id).toBe(first.body.auth_state_id);
    const listed = (await (await server.api('/v1/auth_states')).json()) as { name: string }[];
    expect(listed.filter((s) => s.name === 'twice')).toHaveLength(1);
    const exported = await (
      await server.api(`/v1/auth_states/${String(first.body.auth_state_id)}/storage_state`)
    ).json();
    expect(exported).toEqual({
      cookies: [
        {
          name: 'k',
          value: 'v2',
          domain: '127.0.0.1',
          path: '/',
          expires: -1,
          httpOnly: false,
          secure: false,
          sameSite: 'Lax',
        },
      ],
      origins: [],
    });

    // save_auth (the spec's route) always adds: two states named "dup"
    const x = await start();
    const d1 = await post(`/v1/instance/${x.id}/browser/save_auth?name=dup`);
    const d2 = await post(`/v1/instance/${x.id}/browser/save_auth?name=dup`);
    // an imported cookie Chromium will not take is a 409 naming it, not a 500
    const odd = await post('/v1/auth_states/import?name=odd', {
      cookies: [{ name: 'bad;name', value: 'v', domain: '127.0.0.1', path: '/' }],
      origins: [],
    });
    const refused = await server.api(
      `/v1/instance/${x.id}/browser/authenticate?auth_state_id=${String(odd.body.auth_state_id)}`,
      { method: 'POST' },
    );
    expect(refused.status).toBe(409);
    expect(refused.headers.get('x-burrow-error')).toBe('auth_state_not_applied');
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/cookies refused/);
    await stop(x.id);
    const ambiguous = await server.api('/v1/auth_states/import?name=dup', { json: state });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.headers.get('x-burrow-error')).toBe('auth_state_name_ambiguous');
    const { detail } = (await ambiguous.json()) as { detail: string };
    expect(detail).toContain(String(d1.body.auth_state_id));
    expect(detail).toContain(String(d2.body.auth_state_id));

    expect(await post(`/v1/auth_states/${String(d1.body.auth_state_id)}/delete`)).toEqual({
      status: 200,
      body: { status: 'success' },
    });
    const again = await post(`/v1/auth_states/${String(d1.body.auth_state_id)}/delete`);
    expect(again.status).toBe(404);
    const after = (await (await server.api('/v1/auth_states')).json()) as { id: string }[];
    expect(after.map((s) => s.id)).not.toContain(d1.body.auth_state_id);
    expect(new AuthStore(server.dataDir).list().map((s) => s.id)).not.toContain(
      d1.body.auth_state_id,
    );
  });

  it('a malformed storage state is a 422, not a half-saved state', async () => {
    const before = (await (await server.api('/v1/auth_states')).json()) as unknown[];
    const bad = await server.api('/v1/auth_states/import?name=bad', {
      json: { cookies: [{ name: 'a', value: 'b' }], origins: [{ origin: 'x' }] },
    });
    expect(bad.status).toBe(422);
    const { detail } = (await bad.json()) as { detail: { loc: unknown[] }[] };
    expect(detail.map((d) => d.loc)).toEqual(
      expect.arrayContaining([
        ['body', 'cookies', 0],
        ['body', 'origins', 0, 'localStorage'],
      ]),
    );
    const notJson = await server.api('/v1/auth_states/import', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"cookies": [',
    });
    expect(notJson.status).toBe(422);
    expect((await (await server.api('/v1/auth_states')).json()) as unknown[]).toEqual(before);
  });
});
