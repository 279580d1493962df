/**
 * `burrow-sandbox/playwright-test`: @playwright/test fixtures on a remote browser. Each worker
 * opens one session; `browser`, `context` and `page` are its remote browser, default context and
 * first page, so Playwright never launches a local browser.
 *
 * ```ts
 * import { test, expect } from 'burrow-sandbox/playwright-test';
 * test.use({ authState: 'github' }); // optional: a saved auth state, applied once per worker
 * test('signed in', async ({ page }) => { … });
 * ```
 *
 * The default context is shared by a worker's tests, so cookies and storage carry over between
 * them, as in one real browser. When a test fails, the instance's screenshot and its live-view
 * URL are attached to the report (whatever of the two the server can give).
 */
import { test as base, type TestInfo } from '@playwright/test';
import { openSession, type OpenSessionOptions, type PlaywrightSession } from 'burrow-sandbox';

export { expect } from '@playwright/test';

export interface BurrowWorkerOptions {
  /** A saved auth state's id or name, applied when the worker's session opens. Default none. */
  authState: string | undefined;
  /** More `openSession` options for the worker's session (`baseUrl`, `resolution` …). Default `{}`. */
  sessionOptions: Omit<OpenSessionOptions, 'driver' | 'authState' | 'signal'>;
}

export interface BurrowWorkerFixtures {
  /** The worker's session: the instance, auth helpers, `screenshot()`, `streamUrl()` … */
  burrowSession: PlaywrightSession;
}

/** Attaches the instance's screenshot and live-view URL; never throws. */
async function attachFailure(session: PlaywrightSession, testInfo: TestInfo): Promise<void> {
  const tries = [
    async () =>
      testInfo.attach('screenshot', { body: await session.screenshot(), contentType: 'image/png' }),
    async () =>
      testInfo.attach('live view', {
        body: await session.streamUrl(),
        contentType: 'text/uri-list',
      }),
  ];
  for (const attempt of tries) await attempt().catch(() => undefined);
}

export const test = base.extend<object, BurrowWorkerOptions & BurrowWorkerFixtures>({
  authState: [undefined, { option: true, scope: 'worker' }],
  sessionOptions: [{}, { option: true, scope: 'worker' }],
  burrowSession: [
    async ({ authState, sessionOptions }, use) => {
      const session = await openSession({
        ...sessionOptions,
        ...(authState !== undefined && { authState }),
      });
      try {
        await use(session);
      } finally {
        await session.stop();
      }
    },
    { scope: 'worker', timeout: 180_000 },
  ],
  browser: [async ({ burrowSession }, use) => use(burrowSession.browser), { scope: 'worker' }],
  context: async ({ burrowSession }, use) => use(burrowSession.context),
  page: async ({ burrowSession }, use, testInfo) => {
    const { context } = burrowSession;
    const page = burrowSession.page.isClosed()
      ? (context.pages()[0] ?? (await context.newPage()))
      : burrowSession.page;
    await use(page);
    if (testInfo.status !== testInfo.expectedStatus) await attachFailure(burrowSession, testInfo);
  },
});
