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
import { inSlices } from '../../internal/cpu-share.js';
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

/**
 * The default context's auth state, at most `maxBytes` of JSON (UTF-8) in all, else a 413. The
 * pieces a page can make large (localStorage, IndexedDB, each tab's sessionStorage) are measured
 * where they are read, which sends the server a piece only when it fits what is left: an oversized
 * state costs the browser the work, not the server's memory or main thread. Each piece's values
 * are counted (in shared slices, cpu-share.ts) before it is decoded, at most
 * `MAX_AUTH_STATE_VALUES` in all, else a 413: a byte bound alone let a page's 729,000 empty
 * sessionStorage items (3 MB, inside Chromium's quota) hold the main thread 4.8 s and take RSS to
 * 1.1 GB per save (attack5 A8), and one IndexedDB record of 990,000 empty arrays 1.3 s (A5).
 * Cookies are bounded by Chromium's own quota (3,300); they are counted after they arrive.
 */
export async function captureAuth(scope: AuthScope, maxBytes: number): Promise<BrowserAuthData> {
  const { cdp } = scope;
  const budget = new CaptureBudget(maxBytes);
  const { cookies } = await cdp.send<{ cookies: CdpParams[] }>('Storage.getCookies');
  budget.take(jsonBytes(cookies), 'its cookies');
  const origins = new Set([...scope.origins(), ...cookies.flatMap(cookieOrigin)]);

  const localStorage: BrowserAuthData['localStorage'] = {};
  const indexedDB: NonNullable<BrowserAuthData['indexedDB']> = {};
  await withScratchPage(cdp, async (visit) => {
    const read = async (origin: string, expression: string, what: string, reload?: boolean) => {
      const piece = (await visit(origin, budget.measured(expression), reload)) as Measured;
      return await budget.accept(piece, `${what} of ${origin}`);
    };
    for (const origin of origins) {
      const items = (await read(origin, READ_LOCAL_STORAGE, 'localStorage')) as Items;
      if (Object.keys(items).length > 0) localStorage[origin] = items;
      const databases = (await read(
        origin,
        COLLECT_INDEXEDDB,
        'IndexedDB',
        false,
      )) as IndexedDBDatabase[];
      if (databases.length > 0) indexedDB[origin] = databases;
    }
  });

  const sessionStorage: BrowserAuthData['sessionStorage'] = {};
  for (const tab of scope.tabs()) {
    const origin = originOf(tab.url);
    if (!origin) continue;
    // read in the tab by a measured script: DOMStorage.getDOMStorageItems would hand the
    // server every item decoded, however many. The page may change what the script answers
    // (its own storage, as it may); the server counts and checks it all the same.
    const piece = await ignoreGoneTab(async () => {
      const sessionId = await scope.attach(tab.targetId);
      const { result } = await cdp.send<{ result: { value?: unknown } }>(
        'Runtime.evaluate',
        {
          expression: budget.measured(READ_SESSION_STORAGE),
          returnByValue: true,
          awaitPromise: true,
        },
        sessionId,
        STORAGE_SCRIPT_TIMEOUT_MS,
      );
      return result.value as Measured | undefined;
    });
    if (!piece) continue;
    const items = (await budget.accept(piece, `sessionStorage of ${origin} in a tab`)) as Items;
    if (Object.keys(items).length > 0) {
      sessionStorage[origin] = { ...sessionStorage[origin], ...items };
    }
  }
  return { cookies, localStorage, sessionStorage, indexedDB };
}

/**
 * Values (objects, arrays and the entries in them) the localStorage, sessionStorage and IndexedDB
 * of one auth state may hold: a site's login state is a few dozen; decoding 20,000 tiny ones costs
 * the main thread about 30 ms, 729,000 of them seconds.
 */
export const MAX_AUTH_STATE_VALUES = 20_000;

/**
 * The values of the JSON `text`: its objects and arrays and their entries (the commas between
 * them, plus one for each that is not empty), counted up to `max + 1`. Strings are skipped in
 * native steps; a pause point every few thousand characters or strings.
 */
export function* countJsonValues(text: string, max: number): Generator<void, number> {
  let count = 0;
  let steps = 0;
  for (let i = 0; i < text.length && count <= max; i++) {
    if (++steps % 4096 === 0) yield;
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      for (;;) {
        const end = text.indexOf('"', i + 1);
        if (end === -1) return count;
        let slashes = 0;
        while (text.charCodeAt(end - 1 - slashes) === 0x5c /* \ */) slashes++;
        i = end;
        if (slashes % 2 === 0) break;
      }
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      count++;
      // the first entry, unless it closes at once
      let next = i + 1;
      while (next < text.length && text.charCodeAt(next) <= 0x20) next++;
      const close = text.charCodeAt(next);
      if (close !== 0x5d && close !== 0x7d) count++;
    } else if (c === 0x2c /* , */) {
      count++;
    }
  }
  return count;
}

/** What a measured storage script answers: the value's JSON, or how large it would have been. */
type Measured = { json: string } | { tooLarge: number };

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/** The bytes a capture has left: a 413 as soon as one piece does not fit. */
class CaptureBudget {
  #left: number;
  #valuesLeft = MAX_AUTH_STATE_VALUES;

  constructor(readonly limit: number) {
    this.#left = limit;
  }

  take(bytes: number, what: string): void {
    if (bytes > this.#left) this.#refuse(bytes, what);
    this.#left -= bytes;
  }

  /**
   * `expression` wrapped so that the page answers its value as JSON only if that fits what is
   * left now, and otherwise only the size it would have had.
   */
  measured(expression: string): string {
    return `(async () => {
  const json = JSON.stringify(await (${expression}));
  const bytes = new TextEncoder().encode(json).length;
  return bytes > ${this.#left} ? { tooLarge: bytes } : { json };
})()`;
  }

  /**
   * The value of a measured answer, taken from what is left: its bytes, and its values counted
   * before it is decoded.
   */
  async accept(piece: Measured, what: string): Promise<unknown> {
    if (typeof piece !== 'object' || piece === null) throw new Error(`no answer for ${what}`);
    if ('tooLarge' in piece) this.#refuse(Number(piece.tooLarge), what);
    if (typeof piece.json !== 'string') throw new Error(`no JSON for ${what}`);
    this.take(Buffer.byteLength(piece.json), what);
    const values = await inSlices(countJsonValues(piece.json, this.#valuesLeft));
    if (values > this.#valuesLeft) {
      throw serverError('auth_state_too_many_values', {
        limit: MAX_AUTH_STATE_VALUES,
        reason: `${what} holds more than ${this.#valuesLeft}, with ${MAX_AUTH_STATE_VALUES - this.#valuesLeft} captured before it`,
      });
    }
    this.#valuesLeft -= values;
    return JSON.parse(piece.json);
  }

  #refuse(bytes: number, what: string): never {
    const used = this.limit - this.#left;
    throw serverError('auth_state_too_large', {
      limit: this.limit,
      reason: `${what} is ${bytes} bytes, with ${used} bytes captured before it`,
    });
  }
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

/** A script that reads every item of the page's `storage`, as an object. */
function readStorage(storage: 'localStorage' | 'sessionStorage'): string {
  return `(() => {
  const out = {};
  for (let i = 0; i < ${storage}.length; i++) {
    const key = ${storage}.key(i);
    if (key !== null) out[key] = ${storage}.getItem(key);
  }
  return out;
})()`;
}
const READ_SESSION_STORAGE = readStorage('sessionStorage');
const READ_LOCAL_STORAGE = readStorage('localStorage');

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
