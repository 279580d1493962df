/**
 * What a message sent in many short pieces makes the server hold (src/server/chromium/unmask.ts,
 * `PIECE_CHARGE`): a `cdp_url` holder starts a text message and sends one 1-byte piece after
 * every 63 KiB of unsolicited pongs, never the last. `ws` keeps every piece until the last; each
 * used to be a view of the socket read it came in, so 1 byte charged kept 64 KiB (an outside
 * tester took the server from 117 MiB to 2.6 GiB with three connections). Now each piece is kept
 * in a buffer of its own, charged at least `PIECE_CHARGE`: the server's RSS grows by about what
 * the pieces are charged, not by what was sent.
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

describe('a message sent in many short pieces, never finished', () => {
  it('holds what its pieces are charged, not the reads they came in', async () => {
    const { id, cdpUrl } = await startBrowser(server);
    global.gc?.();
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    let sent = 0;
    let end: (() => Promise<void>) | undefined;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    try {
      const attacker = await sendPieces(cdpUrl, PIECES);
      end = attacker.end;
      sent = attacker.sent;
      // every piece but the first is held, each charged PIECE_CHARGE
      await eventually(
        () => assemblingBytes() === (PIECES + 1) * PIECE_CHARGE,
        `the pieces charged (${assemblingBytes()})`,
        30_000,
      );
      peak = Math.max(peak, process.memoryUsage().rss);
    } finally {
      clearInterval(sampler);
    }
    console.log('cdp-message-pieces:', { sentMiB: sent / MiB, grewMiB: (peak - rss0) / MiB });
    expect(sent).toBeGreaterThan(PIECES * 62_000); // about what the old code kept
    expect(peak - rss0, `RSS ${rss0} → ${peak}`).toBeLessThan(64 * MiB);
    await end!();
    await eventually(() => assemblingBytes() === 0, 'the pieces let go', 30_000);
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }, 180_000);
});
