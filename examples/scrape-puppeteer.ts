/**
 * The same scrape with Puppeteer: `driver: 'puppeteer'` gives Puppeteer's `browser` and `page`.
 * Stopping the session disconnects Puppeteer (never `browser.close()`) and stops the instance.
 *
 *   node --import tsx examples/scrape-puppeteer.ts
 */
import { openSession } from 'burrow-sandbox';
import { serve } from './local-site.js';

const product = (name: string, price: string) =>
  `<li class="product"><span class="name">${name}</span> <span class="price">${price}</span></li>`;
await using site = await serve({
  '/products': `<title>Products</title><ul>${product('Kettle', '25.00')}${product('Teapot', '18.50')}</ul>`,
});

await using session = await openSession({ driver: 'puppeteer' });
const { page } = session;

await page.goto(`${site.url}/products`);
const products = await page.$$eval('.product', (items) =>
  items.map((li) => ({
    name: li.querySelector('.name')?.textContent ?? '',
    price: Number(li.querySelector('.price')?.textContent),
  })),
);
console.log(JSON.stringify({ instance: session.instance.id, products }));
