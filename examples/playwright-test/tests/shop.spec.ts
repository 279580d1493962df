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

test('each test has a fresh context: no cart cookie from before', async ({ page, context }) => {
  expect(await context.cookies()).toEqual([]);
  await page.goto('data:text/html,<title>fresh</title>');
  await expect(page).toHaveTitle('fresh');
});

test.describe('in the instance’s default context', () => {
  // what the live view and recordings show, and where a server-applied authState lives
  test.use({ defaultContext: true });

  test('is what the instance sees', async ({ page, context, browser, burrowSession }) => {
    expect(context).toBe(browser.contexts()[0]);
    expect(burrowSession.instance.status).toBe('running');
    await page.goto('data:text/html,<title>remote</title>');
    expect(await burrowSession.currentUrl()).toBe('data:text/html,<title>remote</title>');
  });
});
