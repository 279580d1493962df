/** Fails on purpose (run with BURROW_FAILURE_DEMO=1): the report gets a screenshot and the live-view URL. */
import { expect, test } from './site.js';

test('a failing test gets a screenshot attached', async ({ page, shopUrl }) => {
  await page.goto(shopUrl);
  await expect(page.locator('#cart')).toHaveText('42', { timeout: 1_000 });
});
