/**
 * `burrow-sandbox/playwright-test`: @playwright/test fixtures on a remote browser. Each worker
 * opens one session (one instance) when a test first needs it; every test gets a fresh browser
 * context on it, built from the test's `use` options as Playwright Test builds its own (`baseURL`,
 * `viewport`, `storageState`, `locale`, …), and closed when the test ends. Playwright never
 * launches a local browser.
 *
 * ```ts
 * import { test, expect } from 'burrow-sandbox/playwright-test';
 * test.use({ baseURL: 'http://127.0.0.1:3000' });
 * test('home', async ({ page }) => { await page.goto('/'); … });
 * ```
 *
 * Opt-ins: `defaultContext: true` runs tests in the instance's default context (where a server
 * applied `authState` lives, and what the live view and recordings show; tests then share its
 * cookies and storage); `instancePerTest: true` gives each test an instance of its own. An option
 * the remote browser cannot honour fails the test with an error naming it (options.ts).
 *
 * On failure the report gets one screenshot (none of ours when Playwright's `screenshot` option
 * takes it). `video` is the instance's recording of the test's pages, in a fresh context or the
 * default one. No live-view URL is attached: the failed test's instance is stopped by then
 * (artifacts.ts). `--headed` shows the remote browser instead of a local window: each session
 * prints its live-view URL, and opens it on a desktop (headed.ts).
 */
import { test as base } from '@playwright/test';
import type { BrowserContext, BrowserContextOptions } from 'playwright-core';
import { openSession, type OpenSessionOptions, type PlaywrightSession } from 'burrow-sandbox';
import { startTestArtifacts, type TestArtifacts } from './artifacts.js';
import { showLiveView } from './headed.js';
import {
  checkDefaultContextOptions,
  checkWorkerOptions,
  isolatedContextOptions,
  sameProxy,
  UnsupportedOptionError,
  videoMode,
  type UseContextOptions,
} from './options.js';

export { expect } from '@playwright/test';
export { UnsupportedOptionError } from './options.js';

export interface BurrowWorkerOptions {
  /**
   * A saved auth state's id or name (cookies, localStorage, IndexedDB): it seeds each test's fresh
   * context as `storageState` would, and the server applies it to the instance's default context
   * when the session opens (`defaultContext: true`, sessionStorage too). Default none.
   */
  authState: string | undefined;
  /** More `openSession` options for the sessions (`baseUrl`, `resolution` …). Default `{}`. */
  sessionOptions: Omit<OpenSessionOptions, 'driver' | 'authState' | 'signal'>;
  /**
   * One instance per test, stopped when the test ends, instead of one per worker. The `browser`
   * fixture is then not available (there is no worker-wide browser): use `context.browser()` or
   * `burrowSession.browser`. Default false.
   */
  instancePerTest: boolean;
}

export interface BurrowTestOptions {
  /**
   * Run the test in the instance's default context instead of a fresh one: it sees a server
   * applied `authState`, shows in the live view and in recordings, and keeps its cookies and
   * storage from one test to the next. Context options cannot apply to it. Default false.
   */
  defaultContext: boolean;
}

export interface BurrowTestFixtures {
  /** The session behind this test's page: the worker's, or its own with `instancePerTest`. */
  burrowSession: PlaywrightSession;
}

/** Saved auth states as Playwright storage states, fetched once per session and state. */
const exported = new WeakMap<PlaywrightSession, Map<string, Promise<unknown>>>();

function authStorageState(session: PlaywrightSession, authState: string): Promise<unknown> {
  let states = exported.get(session);
  if (!states) exported.set(session, (states = new Map()));
  let state = states.get(authState);
  if (!state) {
    state = session.auth.export(authState);
    state.catch(() => states.delete(authState));
    states.set(authState, state);
  }
  return state;
}

/** Each test context's artifacts, for the `page` fixture to wait for its video to start. */
const recordings = new WeakMap<BrowserContext, TestArtifacts>();

/** The worker's sessions (an internal fixture, exported only so extended tests can name it). */
export interface WorkerSessions {
  /** The worker's session, opened on first use and stopped when the worker ends. */
  shared(): Promise<PlaywrightSession>;
  /** A session of its own (the caller stops it), with `proxy` instead of the worker's. */
  open(proxy?: OpenSessionOptions['proxy']): Promise<PlaywrightSession>;
}

/** Internal worker fixtures (exported only so extended tests can name their types). */
export interface BurrowInternalFixtures {
  _burrowSessions: WorkerSessions;
}

export const test = base.extend<
  BurrowTestOptions & BurrowTestFixtures,
  BurrowWorkerOptions & BurrowInternalFixtures
>({
  authState: [undefined, { option: true, scope: 'worker' }],
  sessionOptions: [{}, { option: true, scope: 'worker' }],
  instancePerTest: [false, { option: true, scope: 'worker' }],
  defaultContext: [false, { option: true }],

  _burrowSessions: [
    async ({ authState, sessionOptions, headless }, use) => {
      const open = async (proxy?: OpenSessionOptions['proxy']) => {
        const session = await openSession({
          ...sessionOptions,
          ...(authState !== undefined && { authState }),
          ...(proxy !== undefined && { proxy }),
        });
        if (!headless) await showLiveView(session);
        return session;
      };
      let shared: Promise<PlaywrightSession> | undefined;
      try {
        await use({ shared: () => (shared ??= open()), open: (proxy) => open(proxy) });
      } finally {
        const session = await shared?.catch(() => undefined);
        await session?.stop();
      }
    },
    { scope: 'worker', timeout: 180_000 },
  ],

  browser: [
    async (
      {
        _burrowSessions,
        instancePerTest,
        browserName,
        channel,
        headless,
        launchOptions,
        connectOptions,
      },
      use,
    ) => {
      checkWorkerOptions({ browserName, channel, headless, launchOptions, connectOptions });
      if (instancePerTest) {
        throw new UnsupportedOptionError(
          'instancePerTest',
          'each test has its own browser, so there is no worker-wide `browser` fixture: use context.browser() or burrowSession.browser',
        );
      }
      await use((await _burrowSessions.shared()).browser);
    },
    { scope: 'worker', timeout: 180_000 },
  ],

  burrowSession: [
    async ({ _burrowSessions, instancePerTest, proxy, contextOptions, sessionOptions }, use) => {
      // `use: { proxy }` is the instance's upstream: a test whose proxy is not the worker
      // session's gets an instance of its own started with it (the egress chains to it)
      const wanted = proxy ?? contextOptions?.proxy ?? sessionOptions.proxy;
      const own = instancePerTest || !sameProxy(wanted, sessionOptions.proxy);
      if (!own) return use(await _burrowSessions.shared());
      const session = await _burrowSessions.open(wanted);
      try {
        await use(session);
      } finally {
        await session.stop();
      }
    },
    { timeout: 180_000 },
  ],

  context: async (
    {
      burrowSession,
      defaultContext,
      authState,
      video,
      screenshot,
      browserName,
      channel,
      headless,
      launchOptions,
      connectOptions,
      contextOptions,
      acceptDownloads,
      bypassCSP,
      clientCertificates,
      colorScheme,
      contrast,
      deviceScaleFactor,
      extraHTTPHeaders,
      forcedColors,
      geolocation,
      hasTouch,
      httpCredentials,
      ignoreHTTPSErrors,
      isMobile,
      javaScriptEnabled,
      locale,
      offline,
      permissions,
      proxy,
      reducedMotion,
      screen,
      serviceWorkers,
      storageState,
      timezoneId,
      userAgent,
      viewport,
      baseURL,
    },
    use,
    testInfo,
  ) => {
    checkWorkerOptions({ browserName, channel, headless, launchOptions, connectOptions });
    // Playwright Test learns a fixture's dependencies from the names destructured above and
    // refuses a rest element there, so every context option is named once more to collect them
    const options: UseContextOptions = {
      contextOptions,
      acceptDownloads,
      bypassCSP,
      clientCertificates,
      colorScheme,
      contrast,
      deviceScaleFactor,
      extraHTTPHeaders,
      forcedColors,
      geolocation,
      hasTouch,
      httpCredentials,
      ignoreHTTPSErrors,
      isMobile,
      javaScriptEnabled,
      locale,
      offline,
      permissions,
      proxy,
      reducedMotion,
      screen,
      serviceWorkers,
      storageState,
      timezoneId,
      userAgent,
      viewport,
      baseURL,
    };
    let context: BrowserContext;
    if (defaultContext) {
      checkDefaultContextOptions(options);
      context = burrowSession.context;
    } else {
      const fresh = isolatedContextOptions(options);
      if (authState !== undefined) {
        if (fresh.storageState !== undefined) {
          throw new UnsupportedOptionError(
            'authState',
            'it seeds the context as storageState does, and this test sets storageState too: keep one',
          );
        }
        fresh.storageState = (await authStorageState(burrowSession, authState)) as Exclude<
          BrowserContextOptions['storageState'],
          string | undefined
        >;
      }
      context = await burrowSession.browser.newContext(fresh);
    }
    try {
      const artifacts = await startTestArtifacts({
        session: burrowSession,
        context,
        defaultContext,
        video: videoMode(video),
        screenshot,
        testInfo,
      });
      recordings.set(context, artifacts);
      await use(context);
      await artifacts.finish();
    } finally {
      if (!defaultContext) await context.close({ reason: 'Test ended.' }).catch(() => undefined);
    }
  },

  page: async ({ context, defaultContext, burrowSession }, use) => {
    if (!defaultContext) {
      const page = await context.newPage();
      await recordings.get(context)?.ready(); // the video starts before the test's first step
      return use(page);
    }
    const first = burrowSession.page.isClosed() ? context.pages()[0] : burrowSession.page;
    await use(first ?? (await context.newPage()));
  },
});
