/**
 * Saved auth-state data ↔ Playwright's `storageState` (src/server/auth-states/storage-state.ts): cookies map
 * as Playwright's own Chromium code maps them (session cookies `expires: -1`, a missing SameSite
 * is Lax, the partition key's top-level site as a string), storage becomes name/value lists per
 * origin, and what cannot be applied (non-http origins) is dropped on import.
 */
import { describe, expect, it } from 'vitest';
import { StorageState } from '../../src/api/index.js';
import type { BrowserAuthData } from '../../src/server/instances/runtime.js';
import { fromStorageState, toStorageState } from '../../src/server/auth-states/storage-state.js';

const captured: BrowserAuthData = {
  cookies: [
    // as CDP's Storage.getCookies reports them
    {
      name: 'sid',
      value: 's',
      domain: '127.0.0.1',
      path: '/',
      expires: -1,
      size: 2,
      httpOnly: true,
      secure: false,
      session: true,
      sameSite: 'Strict',
      priority: 'Medium',
      sourceScheme: 'NonSecure',
      sourcePort: 8080,
    },
    {
      name: 'part',
      value: 'p',
      domain: 'a.test',
      path: '/x',
      expires: 1900000000.5,
      size: 5,
      httpOnly: false,
      secure: true,
      session: false,
      partitionKey: { topLevelSite: 'https://top.test', hasCrossSiteAncestor: false },
    },
  ],
  localStorage: { 'http://127.0.0.1:8080': { token: 't' } },
  sessionStorage: { 'http://127.0.0.1:8080': { tab: '1' }, 'https://b.test': { only: 'session' } },
  indexedDB: {
    'https://a.test': [{ name: 'db', version: 3, stores: [] }],
  },
};

describe('storage state conversion', () => {
  it("gives Playwright's shape, which the schema accepts", () => {
    const state = toStorageState(captured);
    expect(state).toEqual({
      cookies: [
        {
          name: 'sid',
          value: 's',
          domain: '127.0.0.1',
          path: '/',
          expires: -1,
          httpOnly: true,
          secure: false,
          sameSite: 'Strict',
        },
        {
          name: 'part',
          value: 'p',
          domain: 'a.test',
          path: '/x',
          expires: 1900000000.5,
          httpOnly: false,
          secure: true,
          sameSite: 'Lax',
          partitionKey: 'https://top.test',
          _crHasCrossSiteAncestor: false,
        },
      ],
      origins: [
        {
          origin: 'http://127.0.0.1:8080',
          localStorage: [{ name: 'token', value: 't' }],
          indexedDB: [],
          sessionStorage: [{ name: 'tab', value: '1' }],
        },
        {
          origin: 'https://a.test',
          localStorage: [],
          indexedDB: [{ name: 'db', version: 3, stores: [] }],
        },
        {
          origin: 'https://b.test',
          localStorage: [],
          indexedDB: [],
          sessionStorage: [{ name: 'only', value: 'session' }],
        },
      ],
    });
    expect(StorageState.safeParse(state).success).toBe(true);
  });

  it('comes back to the same data (what apply needs of each cookie)', () => {
    const back = fromStorageState(toStorageState(captured));
    expect(back.localStorage).toEqual(captured.localStorage);
    expect(back.sessionStorage).toEqual(captured.sessionStorage);
    expect(back.indexedDB).toEqual(captured.indexedDB);
    expect(back.cookies).toEqual([
      {
        name: 'sid',
        value: 's',
        domain: '127.0.0.1',
        path: '/',
        httpOnly: true,
        secure: false,
        session: true,
        sameSite: 'Strict',
      },
      {
        name: 'part',
        value: 'p',
        domain: 'a.test',
        path: '/x',
        expires: 1900000000.5,
        httpOnly: false,
        secure: true,
        session: false,
        sameSite: 'Lax',
        partitionKey: { topLevelSite: 'https://top.test', hasCrossSiteAncestor: false },
      },
    ]);
  });

  it('drops origins that cannot be applied, and never makes a __proto__ key', () => {
    const data = fromStorageState({
      cookies: [{ name: 'u', value: 'v', url: 'https://c.test/app/' }],
      origins: [
        { origin: '__proto__', localStorage: [{ name: 'polluted', value: 'yes' }] },
        { origin: 'chrome-extension://abc', localStorage: [{ name: 'x', value: 'y' }] },
        { origin: 'https://c.test/', localStorage: [{ name: '__proto__', value: 'z' }] },
      ],
    });
    expect(Object.keys(data.localStorage)).toEqual(['https://c.test']);
    expect(Object.getOwnPropertyNames(data.localStorage['https://c.test'])).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(data.cookies).toEqual([
      {
        name: 'u',
        value: 'v',
        url: 'https://c.test/app/',
        httpOnly: false,
        secure: false,
        session: true,
      },
    ]);
  });

  it('the schema wants a url or a domain on each cookie', () => {
    const r = StorageState.safeParse({ cookies: [{ name: 'a', value: 'b' }], origins: [] });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]).toMatchObject({
      path: ['cookies', 0],
      message: 'A cookie needs a url, or a domain and a path',
    });
  });
});
