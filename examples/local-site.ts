/**
 * A tiny site on 127.0.0.1 (port 0) for the examples, so they run offline: `serve(routes)` maps
 * paths to HTML; anything else is a 404.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LocalSite extends AsyncDisposable {
  /** e.g. `http://127.0.0.1:40123` */
  readonly url: string;
}

export async function serve(routes: Record<string, string>): Promise<LocalSite> {
  const server = createServer((req, res) => {
    const html = routes[new URL(req.url ?? '/', 'http://x').pathname];
    res.writeHead(html === undefined ? 404 : 200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(html ?? '<h1>Not found</h1>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    [Symbol.asyncDispose]: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
