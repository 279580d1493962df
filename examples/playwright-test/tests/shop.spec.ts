import { expect, test } from './site.js';

test('lists the products', async ({ page, shopUrl }) => {
  await page.goto(shopUrl);
  await expect(page).toHaveTitle('Tiny shop');
  await expect(page.locator('#products li')).toHaveText(['Kettle — 25 €', 'Teapot — 18 €']);
});

test('adds to the cart', async ({ page, shopUrl }) => {
  await page.goto(shopUrl);
  await page.click('#add');
  await page.click('#add');
  await expect(page.locator('#cart')).toHaveText('2');
});

test('runs in the remote default context', async ({ page, context, browser, burrowSession }) => {
  expect(context).toBe(browser.contexts()[0]);
  expect(context.pages()).toContain(page);
  expect(burrowSession.instance.status).toBe('running');
  await page.goto('data:text/html,<title>remote</title>');
  expect(await burrowSession.currentUrl()).toBe('data:text/html,<title>remote</title>');
});
