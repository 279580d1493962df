/** A tiny shop served on 127.0.0.1 for the specs, as a worker fixture. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test as burrow } from 'burrow-sandbox/playwright-test';

const html = `<!doctype html><title>Tiny shop</title>
<h1>Tiny shop</h1>
<ul id="products"><li>Kettle — 25 €</li><li>Teapot — 18 €</li></ul>
<button id="add">Add to cart</button> <span id="cart">0</span>
<script>
  let n = 0;
  document.getElementById('add').onclick = () => {
    document.getElementById('cart').textContent = String(++n);
  };
</script>`;

export const test = burrow.extend<object, { shopUrl: string }>({
  shopUrl: [
    // eslint-disable-next-line no-empty-pattern -- Playwright requires the destructuring
    async ({}, use) => {
      const server = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      await use(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
    { scope: 'worker' },
  ],
});
export { expect } from 'burrow-sandbox/playwright-test';
