/**
 * A live-view holder's input is held within a bound (issue 35, item 2; MAX_WAITING_INPUTS in
 * src/server/chromium/screencast.ts): the server takes a viewer's events in one at a time, in
 * order, and they were chained without a bound: one viewer's 100,000 events of 10 KB took 1 GB
 * of the server, kept after it left. Here a viewer (in a process of its own) sends text events
 * of 10 KB as fast as its socket takes them, for at most 15 s: past the bound the server stops
 * reading it, so its events wait in its own socket, the server's RSS grows by less than 120 MiB,
 * another client's `/livez` stays fast, and the instance's API answers throughout and after.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attacker } from '../../helpers/attacker.js';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { startBrowser, testServer, type TestServer } from '../../helpers/server.js';

const MiB = 1024 * 1024;

/** Sends up to N text events of 10 KB to URL for at most 15 s; prints how many it sent. */
const VIEWER = `
import WebSocket from 'ws';
const ws = new WebSocket(process.env.URL);
await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
const text = JSON.stringify({ type: 'text', text: 'a'.repeat(10_000) });
const end = Date.now() + 15_000;
let sent = 0;
while (sent < Number(process.env.N) && Date.now() < end) {
  ws.send(text);
  sent++;
  if (sent % 200 === 0)
    while (ws.bufferedAmount > 4 * 2 ** 20 && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
}
console.log(JSON.stringify({ sent, unsent: ws.bufferedAmount }));
ws.terminate();
process.exit(0);
`;

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => {
  await server?.close();
});

describe('live-view input', () => {
  it(
    'from one viewer flooding is held within a bound; the API answers',
    { retry: 1, timeout: 120_000 },
    async () => {
      const { id } = await startBrowser(server);
      const res = await server.api(`/v1/instance/${id}/stream_url`);
      expect(res.status).toBe(200);
      const page = new URL(((await res.json()) as { stream_url: string }).stream_url);
      const url = `ws://${page.host}/stream/${id}/ws?token=${page.searchParams.get('token')!}`;
      const viewer = attacker(VIEWER, { env: { URL: url, N: '40000' } });
      const watch = await watchLivez(server.url);
      const rss0 = process.memoryUsage().rss;
      viewer.go();
      const seen = await watch.until(viewer.exited);
      const peak = seen.peakRss;
      const { sent } = JSON.parse((await viewer.exited).trim()) as { sent: number };
      console.log('liveview-input-flood:', said(seen), { sent, grewMiB: (peak - rss0) / MiB });
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
      expect(sent).toBeGreaterThan(1000); // it did flood
      expect(peak - rss0, `RSS ${rss0} → ${peak}`).toBeLessThan(120 * MiB);
      const shot = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
      expect(shot.status).toBe(200);
      await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    },
  );
});
