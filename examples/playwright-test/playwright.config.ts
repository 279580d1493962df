/**
 * A Playwright Test project whose browser is a remote burrow instance (the embedded server
 * unless BURROW_BASE_URL is set). Run it with:
 *
 *   npx playwright test -c examples/playwright-test
 *
 * Each test gets a fresh context on the worker's instance, built from `use` as in any Playwright
 * Test project; `defaultContext: true` runs a test in the instance's own context instead
 * (shop.spec.ts), which takes no context options.
 *
 * BURROW_FAILURE_DEMO=1 runs only the deliberately failing spec, to show the screenshot that
 * burrow attaches to a failed test.
 */
import { defineConfig } from '@playwright/test';
import type { BurrowWorkerOptions } from 'burrow-sandbox/playwright-test';

const failureDemo = process.env.BURROW_FAILURE_DEMO === '1';

export default defineConfig<object, BurrowWorkerOptions>({
  testDir: './tests',
  ...(failureDemo ? { testMatch: 'failure-demo.spec.ts' } : { testIgnore: 'failure-demo.spec.ts' }),
  workers: 1, // one worker, one remote session
  timeout: 60_000,
  reporter: 'list',
  use: {
    sessionOptions: { resolution: [1024, 768] }, // the instance's screen (live view, recordings)
    viewport: { width: 1280, height: 720 }, // each test's fresh context
  },
});
