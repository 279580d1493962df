/**
 * `cdp_url` clients that do not read are bounded together, not only each (issue 35, item 2): six
 * slow readers of one browser each asking for 56 MiB of replies, under their own 64 MiB bound,
 * used to be held all of it (120 → 432 MB); now past 128 MiB unread for the browser the slowest
 * is closed (1008 and a reason, which the server logs too), another client's `/livez` stays
 * prompt, and the server's RSS grows by at most the browser's total plus 150 MiB of slack. Two
 * such readers on each of four browsers stay under every browser's total (112 MiB each) but
 * pass the server's (448 MiB of 256): the server's total closes the slowest and the RSS grows by
 * at most 256 + 200 MiB (360–415 MiB seen; ~560 MiB with the server's total removed). A browser accepts at
 * most 64 relay clients whatever address they come from (the HTTP cap is off here).
 *
 * The latency bound: p99 under 100 ms, or under this run's p99 before the attack plus 100 ms
 * when the shared machine is that loaded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { cdpClient } from '../../helpers/cdp-client.js';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { startBrowser, testServer, type TestServer } from '../../helpers/server.js';
import {
  CDP_MAX_CLIENTS_PER_BROWSER,
  CDP_MAX_UNREAD_BYTES_PER_BROWSER,
  CDP_MAX_UNREAD_BYTES_TOTAL,
} from '../../../src/api/cdp-limits.js';
import { BROWSER_UNREAD_CLOSE, SERVER_UNREAD_CLOSE } from '../../../src/server/chromium/relay.js';

const MiB = 1024 * 1024;
/**
 * What the server's RSS may grow past the server's total while four browsers answer: what each
 * pipe is reading (up to a message apiece), copies not yet collected. 105–160 MiB was seen.
 */
const SERVER_SLACK = 200 * MiB;

let server: TestServer;
/** The server's log lines: which client it closed, and why. */
const logged: string[] = [];
beforeAll(async () => {
  server = await testServer({
    maxConnectionsPerClient: 0,
    logDestination: { write: (line) => void logged.push(line) },
  });
});
afterAll(async () => {
  await server?.close();
});

/** Reasons the server logged for the clients it closed for not reading, since `from`. */
const closedFor = (from = 0) =>
  logged
    .slice(from)
    .filter((line) => line.includes('closing a CDP client that does not read'))
    .map((line) => (JSON.parse(line) as { why: string }).why);

/** A client of `cdpUrl` attached to its page, from an address of loopback. */
async function slowReader(cdpUrl: string) {
  const c = await cdpClient(cdpUrl);
  const { result } = (await c.call('Target.getTargets')) as {
    result: { targetInfos: { targetId: string; type: string }[] };
  };
  const page = result.targetInfos.find((t) => t.type === 'page')!;
  const attached = (await c.call('Target.attachToTarget', {
    targetId: page.targetId,
    flatten: true,
  })) as { result: { sessionId: string } };
  return { ...c, session: attached.result.sessionId };
}

/** Stops reading and asks for 7 × 8 MiB of replies: 56 MiB, under one client's own 64 MiB. */
function askWithoutReading(c: Awaited<ReturnType<typeof slowReader>>) {
  c.socket.pause();
  const expression = "'x'.repeat(8 * 1024 * 1024)";
  for (let i = 0; i < 7; i++) {
    c.send('Runtime.evaluate', { expression, returnByValue: true }, c.session);
  }
}

/**
 * The slow readers read again: at least `count` of them find their connection closed, each with
 * 1008 and a reason (one that reads within the grace) or ended (1006, one that reads later):
 * which of the two depends on how soon the total was passed, so both are accepted, but not a
 * connection left open past its budget.
 */
async function expectClosed(slow: Awaited<ReturnType<typeof slowReader>>[], count: number) {
  for (const c of slow) c.socket.resume();
  const closes = await Promise.all(
    slow.map((c) =>
      // each reads its backlog (up to its bound) before the close: slow on a busy machine
      Promise.race([c.closed, new Promise<'open'>((r) => setTimeout(() => r('open'), 60_000))]),
    ),
  );
  const ended = closes.filter((c) => c !== 'open');
  expect(ended.length).toBeGreaterThanOrEqual(count);
  for (const c of ended) {
    expect([1006, 1008]).toContain(c.code);
    if (c.code === 1008) expect(c.reason).toMatch(/unread/);
  }
}

/**
 * `other` asks the browser every 300 ms and is answered, 30 times and then until `closed()` says
 * the server closed a slow reader (or 120 s have passed): the replies the readers asked for come
 * at the machine's pace, and 9 s of them did not pass the total on a loaded one.
 */
async function answeredUntil(other: Awaited<ReturnType<typeof cdpClient>>, closed: () => boolean) {
  const end = Date.now() + 120_000;
  for (let i = 0; i < 30 || (!closed() && Date.now() < end); i++) {
    expect(await other.call('Browser.getVersion')).toHaveProperty('result.product');
    await new Promise((r) => setTimeout(r, 300));
  }
}

describe('slow cdp_url readers', () => {
  it(
    'six of them hold at most the browser total; the slowest are closed',
    { retry: 1, timeout: 240_000 },
    async () => {
      // each under its own bound: only a total across clients stops them
      const { id, cdpUrl } = await startBrowser(server);
      const watch = await watchLivez(server.url);
      // what the server logs from here (a retry does not count the first attempt's closes)
      const from = logged.length;
      const rss0 = process.memoryUsage().rss;
      const slow = [];
      for (let i = 0; i < 6; i++) slow.push(await slowReader(cdpUrl));
      for (const c of slow) askWithoutReading(c);
      const other = await cdpClient(cdpUrl);
      // the replies come; meanwhile another client of the browser is answered
      const attack = answeredUntil(other, () =>
        closedFor(from).some((w) => /unread together/.test(w)),
      );
      const seen = await watch.until(attack);
      await attack;
      console.log('slow readers, one browser:', said(seen), { rss0, peak: seen.peakRss });
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
      expect(seen.peakRss - rss0).toBeLessThan(CDP_MAX_UNREAD_BYTES_PER_BROWSER + 150 * MiB);
      // the slowest were closed for the browser's total, and the server says so
      const why = closedFor(from);
      expect(
        why.some((w) => /unread together/.test(w)),
        why.join('; '),
      ).toBe(true);
      await expectClosed(slow, why.length);
      for (const c of slow) c.ws.terminate();
      other.ws.close();
      await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    },
  );

  it(
    'spread over four browsers, each under its own total, they hold at most the server total',
    { retry: 1, timeout: 300_000 },
    async () => {
      // two slow readers a browser: 112 MiB, under the browser's 128; 448 MiB together, over 256
      const browsers = [];
      for (let b = 0; b < 4; b++) browsers.push(await startBrowser(server));
      const watch = await watchLivez(server.url);
      const from = logged.length;
      const rss0 = process.memoryUsage().rss;
      const slow = [];
      for (const { cdpUrl } of browsers) {
        for (let i = 0; i < 2; i++) slow.push(await slowReader(cdpUrl));
      }
      for (const c of slow) askWithoutReading(c);
      const other = await cdpClient(browsers[0]!.cdpUrl);
      const attack = answeredUntil(other, () =>
        closedFor(from).some((w) => w === SERVER_UNREAD_CLOSE.reason),
      );
      const seen = await watch.until(attack);
      await attack;
      const growth = seen.peakRss - rss0;
      console.log('slow readers, four browsers:', said(seen), { growth });
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
      expect(growth).toBeLessThan(CDP_MAX_UNREAD_BYTES_TOTAL + SERVER_SLACK);
      // the server's total closed the slowest, and no browser's own total did
      const why = closedFor(from);
      expect(
        why.some((w) => w === SERVER_UNREAD_CLOSE.reason),
        why.join('; '),
      ).toBe(true);
      expect(why).not.toContain(BROWSER_UNREAD_CLOSE.reason);
      await expectClosed(slow, why.length);
      for (const c of slow) c.ws.terminate();
      other.ws.close();
      for (const { id } of browsers)
        await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    },
  );

  it(`a browser accepts ${CDP_MAX_CLIENTS_PER_BROWSER} clients, from any address`, async () => {
    const { id, cdpUrl } = await startBrowser(server);
    const held = [];
    try {
      for (let i = 0; i < CDP_MAX_CLIENTS_PER_BROWSER; i++) {
        held.push(await cdpClient(cdpUrl, `127.0.0.${2 + (i % 4)}`));
      }
      const refused = await new Promise<number | string>((resolve) => {
        const ws = new WebSocket(cdpUrl, { localAddress: '127.0.0.9' });
        ws.once('open', () => resolve('open'));
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode!));
        ws.once('error', (err) => resolve(err.message));
      });
      expect(refused).toBe(429);
    } finally {
      for (const c of held) c.ws.terminate();
    }
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }, 120_000);
});
