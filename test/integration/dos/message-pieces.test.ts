/**
 * What a message sent in many short pieces, never finished, makes the server hold
 * (src/server/chromium/unmask.ts, `PIECE_CHARGE`): one 1-byte piece after every 63 KiB of
 * unsolicited pongs (test/helpers/message-pieces.ts). `ws` keeps every piece until the last;
 * each used to be a view of the socket read it came in, so 1 byte charged kept 64 KiB: outside
 * testers took the server to 2.6 GiB with three `cdp_url` connections, and again with three live
 * viewers (+506 MiB through the desktop's VNC socket). The relay, the browser live view
 * (chromium/screencast.ts) and the VNC socket (ubuntu/vnc.ts) now read their clients' frames the
 * same way: each piece is kept in a buffer of its own and charged at least `PIECE_CHARGE` to the
 * server's total, so the RSS grows by about what the pieces are charged, not by what was sent.
 */
import { describe, expect, it } from 'vitest';
import { attackWithPieces } from '../../helpers/message-pieces.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const PIECES = 3000;

const server = useServer({}, { timeout: 180_000 });
const browser = useInstance(server, 'browser', {}, 180_000);
const desktop = useInstance(server, 'ubuntu', {}, 180_000);

/** The viewer socket URL of instance `id`'s live view (`websockify` for a desktop). */
async function viewerUrl(id: string, path: 'ws' | 'websockify') {
  const res = await server.api(`/v1/instance/${id}/stream_url`);
  expect(res.status).toBe(200);
  const page = new URL(((await res.json()) as { stream_url: string }).stream_url);
  return `ws://${page.host}/stream/${id}/${path}?token=${page.searchParams.get('token')!}`;
}

describe('a message sent in many short pieces, never finished', () => {
  it('on the cdp_url relay holds what its pieces are charged', async () => {
    await attackWithPieces(browser.cdpUrl, PIECES);
  }, 180_000);

  it('on the browser live view holds what its pieces are charged', async () => {
    await attackWithPieces(await viewerUrl(browser.id, 'ws'), PIECES);
  }, 180_000);

  it("on the desktop's VNC socket holds what its pieces are charged", async () => {
    await attackWithPieces(await viewerUrl(desktop.id, 'websockify'), PIECES, 'binary');
  }, 180_000);
});
