/** Fails on purpose (run with BURROW_FAILURE_DEMO=1): the report gets one screenshot of the test's page. */
import { expect, test } from './site.js';

test('a failing test gets a screenshot attached', async ({ page, shopUrl }) => {
  await page.goto(shopUrl);
  await expect(page.locator('#cart')).toHaveText('42', { timeout: 1_000 });
});
