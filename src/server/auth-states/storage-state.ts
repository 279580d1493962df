/**
 * Saved auth states (src/server/auth-states/store.ts) to and from Playwright's `storageState` JSON
 * (src/api/auth-states.ts). Cookies map field by field (Chromium's partition key object becomes
 * Playwright's top-level-site string and back; a session cookie has `expires: -1`), localStorage
 * and sessionStorage become `[{name, value}]` per origin, and IndexedDB databases are stored in
 * Playwright's form already, so they pass through unchanged.
 */
import type { StorageState, StorageStateCookie } from '../../api/index.js';
import type { BrowserAuthData } from '../instances/runtime.js';

type Cookie = Record<string, unknown>;
type SameSite = 'Strict' | 'Lax' | 'None';

/** Latest `expires` Playwright accepts (year 9999). */
const MAX_EXPIRES = 253402300799;

function toPlaywrightCookie(c: Cookie): StorageStateCookie {
  const expires =
    c.session === true || typeof c.expires !== 'number' || c.expires < 0
      ? -1
      : Math.min(c.expires, MAX_EXPIRES);
  const sameSite = ['Strict', 'Lax', 'None'].includes(String(c.sameSite))
    ? (c.sameSite as SameSite)
    : 'Lax'; // what Chromium does with a cookie that names none
  const out: StorageStateCookie = {
    name: String(c.name ?? ''),
    value: String(c.value ?? ''),
    domain: String(c.domain ?? ''),
    path: String(c.path ?? '/'),
    expires,
    httpOnly: c.httpOnly === true,
    secure: c.secure === true,
    sameSite,
  };
  const key = c.partitionKey as
    { topLevelSite?: unknown; hasCrossSiteAncestor?: unknown } | undefined;
  if (key && typeof key.topLevelSite === 'string') {
    out.partitionKey = key.topLevelSite;
    if (typeof key.hasCrossSiteAncestor === 'boolean') {
      out._crHasCrossSiteAncestor = key.hasCrossSiteAncestor;
    }
  }
  return out;
}

/** A Playwright cookie as the CDP cookie burrow keeps (what `Storage.setCookies` takes). */
function fromPlaywrightCookie(c: StorageStateCookie): Cookie {
  const session = c.expires === undefined || c.expires < 0;
  const out: Cookie = {
    name: c.name,
    value: c.value,
    ...(c.url !== undefined && { url: c.url }),
    ...(c.domain !== undefined && { domain: c.domain }),
    ...(c.path !== undefined && { path: c.path }),
    ...(!session && { expires: c.expires }),
    httpOnly: c.httpOnly ?? false,
    secure: c.secure ?? false,
    session,
    ...(c.sameSite !== undefined && { sameSite: c.sameSite }),
  };
  if (c.partitionKey !== undefined) {
    out.partitionKey = {
      topLevelSite: c.partitionKey,
      hasCrossSiteAncestor: c._crHasCrossSiteAncestor ?? true,
    };
  }
  return out;
}

const pairs = (items: Record<string, string> | undefined) =>
  Object.entries(items ?? {}).map(([name, value]) => ({ name, value }));

/** A saved state as Playwright's `storageState` (origins in a stable, sorted order). */
export function toStorageState(data: BrowserAuthData): StorageState {
  const idb = data.indexedDB ?? {};
  const origins = [
    ...new Set([
      ...Object.keys(data.localStorage),
      ...Object.keys(data.sessionStorage),
      ...Object.keys(idb),
    ]),
  ].sort();
  return {
    cookies: data.cookies.map(toPlaywrightCookie),
    origins: origins.map((origin) => {
      const session = pairs(data.sessionStorage[origin]);
      return {
        origin,
        localStorage: pairs(data.localStorage[origin]),
        indexedDB: idb[origin] ?? [],
        ...(session.length > 0 && { sessionStorage: session }),
      };
    }),
  };
}

/** `scheme://host[:port]` of an http(s) origin or URL, else undefined. */
function httpOrigin(text: string): string | undefined {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Playwright's `storageState` as the data of a saved state (origins not http(s) are dropped). */
export function fromStorageState(state: StorageState): BrowserAuthData {
  const data: Required<BrowserAuthData> = {
    cookies: state.cookies.map(fromPlaywrightCookie),
    localStorage: {},
    sessionStorage: {},
    indexedDB: {},
  };
  for (const o of state.origins) {
    // only http(s) origins can be applied (the key also never becomes `__proto__`)
    const origin = httpOrigin(o.origin);
    if (origin === undefined) continue;
    if (o.localStorage.length > 0) {
      data.localStorage[origin] = {
        ...data.localStorage[origin],
        ...Object.fromEntries(o.localStorage.map((i) => [i.name, i.value])),
      };
    }
    if (o.sessionStorage?.length) {
      data.sessionStorage[origin] = {
        ...data.sessionStorage[origin],
        ...Object.fromEntries(o.sessionStorage.map((i) => [i.name, i.value])),
      };
    }
    if (o.indexedDB?.length) {
      data.indexedDB[origin] = [...(data.indexedDB[origin] ?? []), ...o.indexedDB];
    }
  }
  return data;
}
