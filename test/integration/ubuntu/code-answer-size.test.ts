/**
 * A code execution's answer is bounded by what the server decodes on its main thread (issue 35,
 * item 2): a cell that displays 20 × 10 MB of HTML used to come back as a 30 MB answer, decoded
 * and encoded again while every other client waited 2.6 s. The kernel bridge trims a reply to
 * `MAX_LINE_BYTES` (8 MiB: src/server/ubuntu/kernels/pool.ts, bridge_reply.py); the answer says
 * what was dropped, another client's `/livez` stays prompt, and the server's RSS grows by less
 * than 200 MiB.
 *
 * The latency bound: p99 under 100 ms, or under this run's p99 before the attack plus 100 ms
 * when the shared machine is that loaded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { testServer, type TestServer } from '../../helpers/server.js';
import { MAX_LINE_BYTES } from '../../../src/server/ubuntu/kernels/pool.js';

const MiB = 1024 * 1024;
let server: TestServer;
let id = '';
beforeAll(async () => {
  server = await testServer();
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  expect(res.status).toBe(200);
  id = ((await res.json()) as { id: string }).id;
}, 180_000);
afterAll(async () => {
  await server?.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  await server?.close();
});

describe('code execution answers', () => {
  it(
    '20 × 10 MB of displayed HTML come back trimmed, /livez prompt',
    { retry: 1, timeout: 240_000 },
    async () => {
      // the kernel is up before the reference is taken
      const warm = await server.api(`/v1/instance/${id}/code/execute`, { json: { code: '1' } });
      expect(warm.status).toBe(200);
      const watch = await watchLivez(server.url);
      const rss0 = process.memoryUsage().rss;
      const code = [
        'from IPython.display import HTML, display',
        'for i in range(20):',
        "    display(HTML('<p>' + 'x' * 10_000_000 + '</p>'))",
      ].join('\n');
      const answer = (async () => {
        const res = await server.api(`/v1/instance/${id}/code/execute`, {
          json: { code, timeout: 120 },
        });
        return { status: res.status, body: await res.text() };
      })();
      const seen = await watch.until(answer);
      const { status, body } = await answer;
      console.log('code-answer-size:', said(seen), { bytes: body.length });
      expect(status).toBe(200);
      expect(MAX_LINE_BYTES).toBe(8 * MiB);
      expect(body.length).toBeLessThan(9 * MiB);
      expect(body).toMatch(/output too large for one reply/);
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
      expect(seen.peakRss - rss0).toBeLessThan(200 * MiB);
    },
  );
});
