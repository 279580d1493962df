/**
 * The public URLs of an instance's endpoints, built here and nowhere else: the prefix of its CDP
 * relay (`cdp_url` is it, the browser's path and the token) and its live-view page. Both carry
 * the instance's id in the path the server routes on (`/cdp/<id>/…`, `/stream/<id>/…`,
 * src/server/http/app.ts); the live view's carries a token of its own, derived from the instance's
 * (`liveViewToken`), which opens the live view only.
 */
import { liveViewToken } from '../instances/runtime.js';

/** `publicUrl` without its trailing slashes. */
const base = (publicUrl: string) => publicUrl.replace(/\/+$/, '');

/** `ws://<public host>/cdp/<id>`: where an instance's DevTools endpoints are relayed. */
export function cdpRelayUrl(publicUrl: string, instanceId: string): string {
  return `${base(publicUrl).replace(/^http/, 'ws')}/cdp/${encodeURIComponent(instanceId)}`;
}

/**
 * `http://<public host>/stream/<id>/?token=<live-view token>`: an instance's live-view page, with
 * the live view's own token derived from the instance's `token` (it does not open `/cdp`).
 */
export function liveViewUrl(publicUrl: string, instanceId: string, token: string): string {
  const id = encodeURIComponent(instanceId);
  return `${base(publicUrl)}/stream/${id}/?token=${encodeURIComponent(liveViewToken(token))}`;
}
