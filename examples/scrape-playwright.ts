/**
 * Scraping with Playwright on a remote browser: open a session, read a paginated product list,
 * print it as JSON. `await using` stops the remote instance however the script ends.
 *
 *   node --import tsx examples/scrape-playwright.ts
 */
import { openSession } from 'burrow-sandbox';
import { serve } from './local-site.js';

const product = (name: string, price: string) =>
  `<li class="product"><span class="name">${name}</span> <span class="price">${price}</span></li>`;
await using site = await serve({
  '/products': `<ul>${product('Kettle', '25.00')}${product('Teapot', '18.50')}</ul>
    <a class="next" href="/products/2">next</a>`,
  '/products/2': `<ul>${product('Mug', '6.00')}</ul>`,
});

await using session = await openSession(); // Playwright by default
const { page } = session;

const products: { name: string; price: number }[] = [];
let next: string | null = '/products';
while (next) {
  await page.goto(new URL(next, site.url).href);
  for (const item of await page.locator('.product').all()) {
    products.push({
      name: await item.locator('.name').innerText(),
      price: Number(await item.locator('.price').innerText()),
    });
  }
  next = await page
    .locator('a.next')
    .getAttribute('href', { timeout: 100 })
    .catch(() => null);
}
console.log(JSON.stringify({ instance: session.instance.id, products }));
