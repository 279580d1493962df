/**
 * The service describing itself, without the API key: `GET /openapi.json` (src/api/openapi.ts)
 * and `GET /docs`, an interactive page for it (api-page.html with api-page.page.mjs inlined, no
 * external resources, so it works offline). Both are the public contract, the same for every
 * server of this version; they hold nothing of an instance or a key, and the page sends the key
 * the user types only to this server's `/v1` routes. Which build a server runs stays behind the
 * key (`GET /v1/version`): the document's `info.version` is the API's.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { openApiDocument } from '../../api/openapi.js';
import { loadPage } from '../pages/pages.js';

/** Paths served here; app.ts lets them through without the key. */
export const PUBLIC_PATHS: ReadonlySet<string> = new Set(['/openapi.json', '/docs']);

const PAGE = new URL('./api-page.html', import.meta.url);

/** The page's CSP: its own inline script (by hash) and style, requests to this origin only. */
function policy(html: string): string {
  const hashes = [...html.matchAll(/<script type="module">([\s\S]*?)<\/script>/g)].map(
    (m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`,
  );
  return [
    "default-src 'none'",
    `script-src ${hashes.join(' ')}`,
    "style-src 'unsafe-inline'",
    "connect-src 'self'",
    'img-src data:',
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export function registerApiDocs(app: FastifyInstance): void {
  let doc: string | undefined;
  app.get('/openapi.json', async (_req, reply) => {
    doc ??= JSON.stringify(openApiDocument());
    return reply.type('application/json; charset=utf-8').send(doc);
  });
  app.get('/docs', async (_req, reply) => {
    const html = await loadPage(PAGE);
    return reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', policy(html))
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'no-cache')
      .send(html);
  });
}
