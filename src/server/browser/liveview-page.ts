/**
 * The live-view page of a browser instance (`stream_url`): liveview.html with its script
 * liveview.page.mjs, a canvas that shows the screencast of the active tab and sends mouse and
 * keyboard back over `/stream/<id>/ws?token=…` (protocol in ../chromium/screencast.ts). One
 * self-contained document (../pages/pages.ts), so the token in the page's own query is all it needs.
 */
import { serverError } from '../errors.js';
import { loadPage } from '../pages/pages.js';
import type { StreamPage } from '../instances/runtime.js';

export type { StreamPage } from '../instances/runtime.js';

const PAGE = new URL('./liveview.html', import.meta.url);

/** Answer a GET under `/stream/<id>/<rest>` for a browser instance's live view (else 404). */
export async function browserLiveViewPage(rest: string): Promise<StreamPage> {
  if (rest === '' || rest === 'index.html') {
    return { status: 200, type: 'text/html; charset=utf-8', body: await loadPage(PAGE) };
  }
  throw serverError('live_view_not_found');
}
