/**
 * What a live viewer's message sent in many short pieces makes the server hold (attack4's L): the
 * browser live view (chromium/screencast.ts) and the ubuntu desktop's VNC socket (ubuntu/vnc.ts)
 * read their viewers' frames as the CDP relay does (chromium/unmask.ts), so a piece is kept in a
 * buffer of its own and charged `PIECE_CHARGE` to the server's total, not kept as a view of the
 * 64 KiB socket read it came in: an outside tester took the server from 487 MiB to 2.6 GiB in
 * 34 s with three live-view connections, and +506 MiB through VNC.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PIECE_CHARGE, assemblingBytes } from '../../../src/server/chromium/unmask.js';
import { sendPieces } from '../../helpers/message-pieces.js';
import { eventually, startBrowser, testServer, type TestServer } from '../../helpers/server.js';

const MiB = 1024 * 1024;
const PIECES = 3000;

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => {
  await server?.close();
});

/** The viewer socket URL of instance `id`'s live view (`websockify` for a desktop). */
async function viewerUrl(id: string, path: 'ws' | 'websockify') {
  const res = await server.api(`/v1/instance/${id}/stream_url`);
  expect(res.status).toBe(200);
  const page = new URL(((await res.json()) as { stream_url: string }).stream_url);
  return `ws://${page.host}/stream/${id}/${path}?token=${page.searchParams.get('token')!}`;
}

/** Sends the pieces to `url`: what the server held and grew by, then that it let go. */
async function attack(url: string, protocol?: string) {
  global.gc?.();
  const rss0 = process.memoryUsage.rss();
  let peak = rss0;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  try {
    const { sent, end } = await sendPieces(url, PIECES, protocol);
    // every piece but the first is held, each charged PIECE_CHARGE
    await eventually(
      () => assemblingBytes() === (PIECES + 1) * PIECE_CHARGE,
      `the pieces charged (${assemblingBytes()})`,
      30_000,
    );
    peak = Math.max(peak, process.memoryUsage.rss());
    console.log('viewer-message-pieces:', { sentMiB: sent / MiB, grewMiB: (peak - rss0) / MiB });
    expect(sent).toBeGreaterThan(PIECES * 62_000); // about what the old code kept
    expect(peak - rss0, `RSS ${rss0} → ${peak}`).toBeLessThan(64 * MiB);
    await end();
    await eventually(() => assemblingBytes() === 0, 'the pieces let go', 30_000);
  } finally {
    clearInterval(sampler);
  }
}

describe('a viewer message sent in many short pieces, never finished', () => {
  it('on the browser live view holds what its pieces are charged', async () => {
    const { id } = await startBrowser(server);
    await attack(await viewerUrl(id, 'ws'));
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }, 180_000);

  it("on the desktop's VNC socket holds what its pieces are charged", async () => {
    const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    await attack(await viewerUrl(id, 'websockify'), 'binary');
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }, 180_000);
});
