/**
 * What an instance can make the server decode through its kernels (attack5 A2/A2b): an execution
 * (or an IPython startup hook in the instance's home, for every execution, the operator's
 * `print(1)` included) displays `[{}] * 950000` as `application/json` (2.85 MB, under the
 * bridge's 8 MiB line and 1,000,000-container bounds). Decoding that on the main thread and encoding the answer again held
 * another client's `/livez` 1.5–1.7 s a call. The bridge's lines are now decoded in the
 * kernel-reply thread (src/server/ubuntu/kernels/reply-thread.ts) and the outputs spliced into the
 * answer as JSON bytes: `/livez` stays within `livezBound`, RSS grows little, and the answer still
 * carries `print(1)`'s output and the hook's display whole. Past 1,000,000 objects and arrays the
 * bridge drops outputs with a notice, as past 8 MiB.
 */
import { describe, expect, it } from 'vitest';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const MiB = 2 ** 20;
const server = useServer({}, { timeout: 120_000 });
const ubuntu = useInstance(server, 'ubuntu');

const execute = async (code: string) => {
  const res = await server.api(`/v1/instance/${ubuntu.id}/code/execute`, {
    json: { code, timeout: 120 },
  });
  return { status: res.status, text: await res.text() };
};

const BOMB = `from IPython.display import display
print(1)
display({"application/json": [{}] * 950000}, raw=True)`;

describe('kernel outputs of many JSON containers', () => {
  it(
    'an execution displaying 950,000 empty objects: /livez prompt, the answer whole',
    { retry: 1, timeout: 240_000 },
    async () => {
      const warm = await execute('1');
      expect(warm.status).toBe(200);
      const rss0 = process.memoryUsage().rss;
      const watch = await watchLivez(server.url);
      const calls = (async () => {
        const answers = [];
        for (let i = 0; i < 3; i++) answers.push(await execute(BOMB));
        return answers;
      })();
      const seen = await watch.until(calls);
      const answers = await calls;
      console.log('kernel-json-outputs:', said(seen), {
        bytes: answers.map((a) => a.text.length),
        rss: Math.round((seen.peakRss - rss0) / MiB),
      });
      for (const { status, text } of answers) {
        expect(status).toBe(200);
        const answer = JSON.parse(text) as {
          status: string;
          stdout: string;
          outputs: { output_type: string; data?: Record<string, unknown> }[];
        };
        expect(answer.status).toBe('ok');
        expect(answer.stdout).toBe('1\n');
        const shown = answer.outputs.find((o) => o.output_type === 'display_data');
        expect((shown?.data?.['application/json'] as unknown[]).length).toBe(950_000);
      }
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
      expect(seen.peakRss - rss0).toBeLessThan(300 * MiB);
    },
  );

  it('past 1,000,000 containers the outputs are dropped with a notice, the kernel lives', async () => {
    const res = await execute(
      'from IPython.display import display\ndisplay({"application/json": [[]] * 1_200_000}, raw=True)\nprint(2)',
    );
    expect(res.status).toBe(200);
    const answer = JSON.parse(res.text) as { status: string; stdout: string; outputs: unknown[] };
    expect(answer.stdout).toContain('2\n');
    expect(res.text).toMatch(/output too large for one reply/);
    const next = JSON.parse((await execute('print(3)')).text) as { stdout: string };
    expect(next.stdout).toBe('3\n');
  }, 240_000);
});
