/**
 * The HTTP side of hand-offs (issue 23; the records are instances/handoffs.ts): which token opens
 * an instance's live view (its own, or a pending hand-off's), the banner with the message and
 * Done on the page a hand-off token opens, and the Done request itself
 * (`POST /stream/<id>/handoff/done?token=…`, no API key: the token is the credential).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { HttpError, serverError } from '../errors.js';
import type { HandoffRecord } from '../instances/handoffs.js';
import type { InstanceView, Registry } from '../instances/registry.js';
import { liveViewToken, type StreamPage } from '../instances/runtime.js';
import { fillPage, loadPage } from '../pages/pages.js';
import { authenticated } from './limits.js';

const BANNER = new URL('./handoff-banner.html', import.meta.url);

const digest = (s: string) => createHash('sha256').update(s).digest();
/** Constant time, whatever the lengths (both sides hashed first). */
const same = (a: string, b: string) => timingSafeEqual(digest(a), digest(b));

/**
 * The instance a token-checked route (`/cdp/<id>/…`, `/stream/<id>/…`) names. These routes need
 * no API key, so an id no instance has is answered as a wrong token is (401), never 404: whoever
 * holds neither the key nor a token must not learn which ids exist.
 */
export function tokenRoute(
  registry: Registry,
  id: string,
  kind: 'CDP' | 'live-view',
): InstanceView {
  try {
    return registry.get(id);
  } catch (err) {
    if (err instanceof HttpError && err.code === 'instance_not_found') {
      throw serverError('token_invalid', { kind });
    }
    throw err;
  }
}

/** Who a live-view token belongs to: the instance itself, or one of its pending hand-offs. */
export type ViewerAccess = { handoff?: HandoffRecord };

/**
 * The access `token` gives to the live view of `rec`, or the 401 of a wrong, missing, expired
 * or used one. Every pending hand-off's token is compared, so the time taken does not tell which
 * one matched.
 */
export function viewerAccess(registry: Registry, rec: InstanceView, token: string): ViewerAccess {
  let access: ViewerAccess | undefined;
  // the instance's own token (`cdp_url`'s) opens its live view too; the live view's opens only it
  if (rec.token !== '' && (same(token, rec.token) || same(token, liveViewToken(rec.token)))) {
    access = {};
  }
  for (const h of registry.handoffs.pending(rec.id)) {
    if (same(token, h.token) && !access) access = { handoff: h };
  }
  if (!access) throw serverError('token_invalid', { kind: 'live-view' });
  return access;
}

const escapeHtml = (s: string) =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

/** The live-view page `page` with the banner of `h` before its `</body>`. */
export async function withBanner(page: StreamPage, h: HandoffRecord): Promise<StreamPage> {
  const banner = fillPage(await loadPage(BANNER), {
    message: escapeHtml(h.message),
    expires: h.expiresAt.toISOString(),
  });
  const html = page.body.toString();
  const at = html.lastIndexOf('</body>');
  const body = at < 0 ? html + banner : html.slice(0, at) + banner + html.slice(at);
  return { ...page, body };
}

/** `POST /stream/<id>/handoff/done?token=<hand-off token>`: the person pressed Done. */
export function registerHandoffDone(app: FastifyInstance, registry: Registry): void {
  app.post('/stream/:id/handoff/done', { bodyLimit: 1024 }, async (req) => {
    const { id } = req.params as { id: string };
    const url = new URL(req.url, 'http://localhost');
    const rec = tokenRoute(registry, id, 'live-view'); // an unknown id: 401, as a wrong token
    const { handoff } = viewerAccess(registry, rec, url.searchParams.get('token') ?? '');
    // the instance's own token opens the live view, but there is no hand-off to end with it
    if (!handoff) throw serverError('token_invalid', { kind: 'hand-off' });
    authenticated(req.raw.socket, req.raw);
    registry.handoffs.end(handoff, 'done');
    return handoff.toJSON();
  });
}
