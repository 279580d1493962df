/**
 * Auth-state capture and apply over CDP, for the default browser context.
 *
 * - Cookies: `Storage.getCookies` / `Storage.setCookies` (HttpOnly included).
 * - localStorage and IndexedDB: read and written in a *scratch page*, a hidden target (invisible
 *   to Playwright and Puppeteer, never in the tab strip) whose requests are all fulfilled locally
 *   with an empty document, so visiting an origin touches neither the network nor the user's
 *   tabs. IndexedDB databases travel whole, in Playwright's form (auth-indexeddb.ts); applying one
 *   replaces the database of that name and leaves the origin's others alone.
 * - sessionStorage lives per tab: captured from the open tabs; applied to every open tab, at once
 *   where the tab already shows that origin, otherwise by a one-shot script that seeds the next
 *   document of that origin in the tab. Tabs opened later start empty, as in any browser.
 */
import type { IndexedDBDatabase } from '../../api/index.js';
import { serverError } from '../errors.js';
import type { BrowserAuthData } from '../instances/runtime.js';
import { COLLECT_INDEXEDDB, restoreIndexedDB } from './auth-indexeddb.js';
import { CdpError, type CdpConnection, type CdpParams } from './cdp.js';

type Items = Record<string, string>;

/** What auth capture and apply need from a running browser. */
export interface AuthScope {
  readonly cdp: CdpConnection;
  /** Open tabs of the default context. */
  tabs(): { targetId: string; url: string }[];
  /** http(s) origins whose storage may matter: visited ones and those of applied states. */
  origins(): Iterable<string>;
  /** A flattened session on `targetId`, attached once and reused. */
  attach(targetId: string): Promise<string>;
}

export async function captureAuth(scope: AuthScope): Promise<BrowserAuthData> {
  const { cdp } = scope;
  const { cookies } = await cdp.send<{ cookies: CdpParams[] }>('Storage.getCookies');
  const origins = new Set([...scope.origins(), ...cookies.flatMap(cookieOrigin)]);

  const localStorage: BrowserAuthData['localStorage'] = {};
  const indexedDB: NonNullable<BrowserAuthData['indexedDB']> = {};
  await withScratchPage(cdp, async (visit) => {
    for (const origin of origins) {
      const items = (await visit(origin, READ_LOCAL_STORAGE)) as Items;
      if (Object.keys(items).length > 0) localStorage[origin] = items;
      const databases = (await visit(origin, COLLECT_INDEXEDDB, false)) as IndexedDBDatabase[];
      if (databases.length > 0) indexedDB[origin] = databases;
    }
  });

  const sessionStorage: BrowserAuthData['sessionStorage'] = {};
  for (const tab of scope.tabs()) {
    const origin = originOf(tab.url);
    if (!origin) continue;
    const entries = await ignoreGoneTab(async () => {
      const sessionId = await scope.attach(tab.targetId);
      const storageId = { securityOrigin: origin, isLocalStorage: false };
      const res = await cdp.send<{ entries: [string, string][] }>(
        'DOMStorage.getDOMStorageItems',
        { storageId },
        sessionId,
      );
      return res.entries;
    });
    if (entries?.length) {
      sessionStorage[origin] = { ...sessionStorage[origin], ...Object.fromEntries(entries) };
    }
  }
  return { cookies, localStorage, sessionStorage, indexedDB };
}

/** The http(s) origins whose storage `data` holds. */
export function authOrigins(data: BrowserAuthData): string[] {
  const all = [
    ...Object.keys(data.localStorage),
    ...Object.keys(data.sessionStorage),
    ...Object.keys(data.indexedDB ?? {}),
  ];
  return [...new Set(all.flatMap((o) => originOf(o) ?? []))];
}

export async function applyAuth(scope: AuthScope, data: BrowserAuthData): Promise<void> {
  const { cdp } = scope;
  try {
    await cdp.send('Storage.setCookies', { cookies: data.cookies.map(toCookieParam) });
  } catch (err) {
    // an imported cookie Chromium will not take (a malformed domain …)
    if (err instanceof CdpError) {
      throw serverError('auth_state_not_applied', { reason: `cookies refused: ${err.message}` });
    }
    throw err;
  }

  const local = new Map(Object.entries(data.localStorage).filter(([o]) => originOf(o) === o));
  const idb = new Map(Object.entries(data.indexedDB ?? {}).filter(([o]) => originOf(o) === o));
  if (local.size > 0 || idb.size > 0) {
    await withScratchPage(cdp, async (visit) => {
      for (const origin of new Set([...local.keys(), ...idb.keys()])) {
        const items = local.get(origin);
        if (items) await visit(origin, writeStorage('localStorage', items));
        const databases = idb.get(origin);
        if (!databases?.length) continue;
        try {
          await visit(origin, restoreIndexedDB(databases), false);
        } catch (err) {
          // the page's own refusal (a tab holding a database open) is the caller's to resolve
          if (err instanceof StorageScriptError) {
            throw serverError('auth_state_not_applied', { reason: err.message });
          }
          throw err;
        }
      }
    });
  }

  const session = Object.entries(data.sessionStorage).filter(([o]) => originOf(o) === o);
  for (const tab of session.length > 0 ? scope.tabs() : []) {
    await ignoreGoneTab(async () => {
      const sessionId = await scope.attach(tab.targetId);
      for (const [origin, items] of session) {
        if (originOf(tab.url) !== origin) {
          await seedNextDocument(cdp, sessionId, origin, items);
          continue;
        }
        const storageId = { securityOrigin: origin, isLocalStorage: false };
        for (const [key, value] of Object.entries(items)) {
          await cdp.send('DOMStorage.setDOMStorageItem', { storageId, key, value }, sessionId);
        }
      }
    });
  }
}

/**
 * Run a step on one tab; a tab that closed or navigated away meanwhile is skipped (undefined),
 * it has nothing left to capture or seed.
 */
async function ignoreGoneTab<T>(step: () => Promise<T>): Promise<T | undefined> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof CdpError) return undefined;
    throw err;
  }
}

/**
 * Seed sessionStorage of the next top-level document of `origin` in the tab behind `sessionId`,
 * once: the script is removed as soon as the tab has committed a document of that origin.
 */
async function seedNextDocument(
  cdp: CdpConnection,
  sessionId: string,
  origin: string,
  items: Items,
): Promise<void> {
  await cdp.send('Page.enable', {}, sessionId);
  const source = `if (window === top && location.origin === ${JSON.stringify(origin)}) {
    try { ${writeStorage('sessionStorage', items)} } catch {}
  }`;
  const { identifier } = await cdp.send<{ identifier: string }>(
    'Page.addScriptToEvaluateOnNewDocument',
    { source },
    sessionId,
  );
  const offs = [
    cdp.on('Page.frameNavigated', (params, sid) => {
      const frame = params.frame as { parentId?: string; securityOrigin?: string };
      if (sid !== sessionId || frame.parentId !== undefined || frame.securityOrigin !== origin) {
        return;
      }
      done();
      cdp
        .send('Page.removeScriptToEvaluateOnNewDocument', { identifier }, sessionId)
        .catch(() => {}); // the tab closed meanwhile: nothing left to remove
    }),
    cdp.on('Target.detachedFromTarget', (params) => {
      if (params.sessionId === sessionId) done();
    }),
  ];
  const done = () => offs.forEach((off) => off());
}

/**
 * Shows an empty document of `origin` in the scratch page (unless it shows one already and
 * `reload` is false) and evaluates `expression` there, awaiting a promise it returns.
 */
type Visit = (origin: string, expression: string, reload?: boolean) => Promise<unknown>;

/** A storage script threw in the page: its message is the page's. */
class StorageScriptError extends Error {}

/** Run `fn` with a hidden page that can show an empty document of any origin and evaluate there. */
async function withScratchPage<T>(
  cdp: CdpConnection,
  fn: (visit: Visit) => Promise<T>,
): Promise<T> {
  const { targetId } = await cdp.send<{ targetId: string }>('Target.createTarget', {
    url: 'about:blank',
    hidden: true,
    background: true,
  });
  const offs: (() => void)[] = [];
  try {
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', {
      targetId,
      flatten: true,
    });
    offs.push(
      cdp.on('Fetch.requestPaused', (params, sid) => {
        if (sid !== sessionId) return;
        cdp
          .send(
            'Fetch.fulfillRequest',
            {
              requestId: params.requestId,
              responseCode: 200,
              responseHeaders: [{ name: 'Content-Type', value: 'text/html' }],
              body: EMPTY_DOCUMENT,
            },
            sessionId,
          )
          .catch(() => {}); // the scratch page closed meanwhile
      }),
    );
    await Promise.all([
      cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*' }] }, sessionId),
      cdp.send('Network.setBypassServiceWorker', { bypass: true }, sessionId),
      cdp.send('Page.enable', {}, sessionId),
    ]);
    let shown: string | undefined;
    return await fn(async (origin, expression, reload = true) => {
      if (reload || shown !== origin) {
        shown = undefined;
        const loaded = cdp.waitFor('Page.loadEventFired', sessionId);
        loaded.catch(() => {}); // awaited below, unless the navigation fails first
        const nav = await cdp.send<{ errorText?: string }>(
          'Page.navigate',
          { url: `${origin}/` },
          sessionId,
        );
        if (nav.errorText) {
          throw new Error(`Could not open ${origin} in the scratch page: ${nav.errorText}`);
        }
        await loaded;
        shown = origin;
      }
      const { result, exceptionDetails } = await cdp.send<{
        result: { value?: unknown };
        exceptionDetails?: { text: string; exception?: { description?: string } };
      }>(
        'Runtime.evaluate',
        { expression, returnByValue: true, awaitPromise: true },
        sessionId,
        STORAGE_SCRIPT_TIMEOUT_MS,
      );
      if (exceptionDetails) {
        const why = exceptionDetails.exception?.description?.split('\n')[0];
        throw new StorageScriptError(
          `Storage access failed on ${origin}: ${why ?? exceptionDetails.text}`,
        );
      }
      return result.value;
    });
  } finally {
    for (const off of offs) off();
    await cdp.send('Target.closeTarget', { targetId }).catch(() => {});
  }
}

/** Reading or writing one origin's storage (IndexedDB may be large). */
const STORAGE_SCRIPT_TIMEOUT_MS = 60_000;

const EMPTY_DOCUMENT = Buffer.from('<!doctype html><title></title>').toString('base64');

const READ_LOCAL_STORAGE = `(() => {
  const out = {};
  for (let i = 0; i < localStorage.length; i++) {
    const key = localStorage.key(i);
    if (key !== null) out[key] = localStorage.getItem(key);
  }
  return out;
})()`;

function writeStorage(storage: 'localStorage' | 'sessionStorage', items: Items): string {
  return `for (const [k, v] of Object.entries(${JSON.stringify(items)})) ${storage}.setItem(k, v);`;
}

/** The origin of an http(s) URL, or undefined. */
export function originOf(url: string): string | undefined {
  try {
    const { protocol, origin } = new URL(url);
    return protocol === 'http:' || protocol === 'https:' ? origin : undefined;
  } catch {
    return undefined;
  }
}

/** The origin that most likely set a cookie (its scheme and port as Chromium recorded them). */
function cookieOrigin(cookie: CdpParams): string[] {
  const host = String(cookie.domain ?? '').replace(/^\./, '');
  const scheme = cookie.sourceScheme === 'Secure' || cookie.secure === true ? 'https' : 'http';
  const port =
    typeof cookie.sourcePort === 'number' && cookie.sourcePort > 0 ? cookie.sourcePort : undefined;
  const origin = originOf(`${scheme}://${host}${port ? `:${port}` : ''}`);
  return origin ? [origin] : [];
}

/** A captured `Network.Cookie` as a `Storage.setCookies` parameter (session cookies stay so). */
function toCookieParam(cookie: Record<string, unknown>): Record<string, unknown> {
  const { size: _size, session, expires, ...param } = cookie;
  return session === true || typeof expires !== 'number' || expires < 0
    ? param
    : { ...param, expires };
}
