/**
 * Host disk an instance can spend through its artifacts: a recording replaced inside by a sparse
 * 4 GB file (free inside, its quota untouched) must not become 4 GB in the server's data dir when
 * the instance stops. A real ubuntu instance records a clip, its shell turns the clip into a
 * sparse file, and the retained copy after stop is measured on the host disk.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useServer } from '../../helpers/use-server.js';

const server = useServer({}, { timeout: 60_000 });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Disk blocks used under `dir`, in bytes (what the host really spends, holes excluded). */
const diskUsage = (dir: string) =>
  Number(execFileSync('du', ['-s', '--block-size=1', dir], { encoding: 'utf8' }).split('\t')[0]);

/** The retained directory of `id` in the test server's data dir. */
function retainedDir(id: string): string {
  const instances = join(server.dataDir, 'instances');
  const run = readdirSync(instances).find((d) => d.startsWith(`run-${process.pid}-`))!;
  return join(instances, run, 'retained', id);
}

async function json<T>(res: Response): Promise<T> {
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as T;
}

describe('artifacts retained after stop', () => {
  it('a sparse 4 GB recording costs the data dir nothing; a real clip is kept', async () => {
    const { id } = await json<{ id: string }>(
      await server.api('/v1/start', { json: { instance_type: 'ubuntu', resolution: [320, 240] } }),
    );
    const clip = async () => {
      const { recording_id } = await json<{ recording_id: string }>(
        await server.api(`/v1/instance/${id}/recording/start`, { method: 'POST' }),
      );
      await sleep(1_200);
      await json(await server.api(`/v1/instance/${id}/recording/stop`, { method: 'POST' }));
      return recording_id;
    };
    const sparse = await clip();
    const kept = await clip();

    // inside: the finished clip becomes 4 GB long without using the disk
    const bash = await json<{ output?: string }>(
      await server.api(`/v1/instance/${id}/bash`, {
        json: {
          command: `truncate -s 4000000000 ~/Recordings/${sparse}.mp4 && stat -c '%s %b' ~/Recordings/${sparse}.mp4`,
        },
      }),
    );
    expect(JSON.stringify(bash)).toContain('4000000000 ');
    const listed = await json<{ id: string; size: number }[]>(
      await server.api(`/v1/instance/${id}/recordings`),
    );
    expect(listed.find((r) => r.id === sparse)?.size).toBe(4_000_000_000);

    const started = performance.now();
    await json(await server.api(`/v1/instance/${id}/stop`, { method: 'POST' }));
    const after = await json<{ id: string; size: number }[]>(
      await server.api(`/v1/instance/${id}/recordings`),
    );
    expect(performance.now() - started).toBeLessThan(30_000);

    // the sparse one is not kept (logged), the real one is, and the data dir holds only it
    expect(after.map((r) => r.id)).toEqual([kept]);
    const keptSize = after[0]!.size;
    expect(keptSize).toBeGreaterThan(0);
    expect(diskUsage(retainedDir(id))).toBeLessThan(keptSize + 1024 * 1024);
    const res = await server.api(`/v1/instance/${id}/recordings/${sparse}`);
    expect(res.status).toBe(404);
  }, 180_000);
});
