/**
 * An instance's stop leaves nothing for the host's init to reap: the instance's pid 1 is reaped
 * by its own parent (the anchor that made its pid namespace), not orphaned to pid 1 of the host
 * as a zombie. On a host whose init does not reap (a container started without one), each such
 * zombie would stay until the host or container ends.
 *
 * Browser and ubuntu instances of a real server, stopped all at once; a watch in a process of its
 * own reads /proc in a loop from before the stops until each instance's pid 1 (by its number and
 * start time) is gone, counting the times it is seen as a zombie whose parent is 1.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pidsMatching, testServer, type TestServer } from '../helpers/server.js';

let server: TestServer;

beforeAll(async () => {
  server = await testServer({ maxInstances: 8 });
}, 120_000);

afterAll(async () => {
  await server?.close();
});

/**
 * Watch processes `pids` until each is reaped (or `limitMs`), from a process of its own (a watch
 * in this process would slow the server's event loop, which runs in it, between its steps): how
 * often each was seen as a zombie whose parent is 1, and whether it went.
 */
function watch(pids: number[], limitMs: number) {
  const script = `
    const { readFileSync } = require('node:fs');
    const stat = (pid) => {
      try {
        const s = readFileSync('/proc/' + pid + '/stat', 'utf8');
        const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
        return { state: f[0], ppid: Number(f[1]), start: f[19] };
      } catch { return undefined; }
    };
    const pids = JSON.parse(process.argv[1]);
    const starts = pids.map((p) => stat(p)?.start);
    const out = pids.map(() => ({ orphaned: 0, gone: false }));
    process.stdout.write('watching\\n');
    const end = Date.now() + ${limitMs};
    while (Date.now() < end && out.some((o) => !o.gone)) {
      pids.forEach((pid, i) => {
        if (out[i].gone) return;
        const s = stat(pid);
        if (!s || s.start !== starts[i]) out[i].gone = true;
        else if (s.state === 'Z' && s.ppid === 1) out[i].orphaned++;
      });
    }
    process.stdout.write(JSON.stringify(out) + '\\n');
  `;
  const child = spawn(process.execPath, ['-e', script, JSON.stringify(pids)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  const started = new Promise<void>((resolve) => {
    const check = () =>
      text.startsWith('watching') ? resolve() : child.stdout.once('data', check);
    check();
  });
  const result = new Promise<{ orphaned: number; gone: boolean }[]>((resolve, reject) =>
    child.once('exit', () => {
      try {
        resolve(JSON.parse(text.split('\n')[1]!) as { orphaned: number; gone: boolean }[]);
      } catch (err) {
        reject(err as Error);
      }
    }),
  );
  return { started, result };
}

async function start(type: 'browser' | 'ubuntu'): Promise<string> {
  const res = await server.api('/v1/start', { json: { instance_type: type } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

describe('stopping instances', () => {
  it("leaves no instance's pid 1 a zombie of the host's init (browser and ubuntu, four stops at once)", async () => {
    const ids = await Promise.all(
      (['browser', 'browser', 'ubuntu', 'ubuntu'] as const).map((t) => start(t)),
    );
    const inits = ids.map((id) => {
      // pid 1 itself, not the bubblewrap above it whose arguments name it too
      const init = pidsMatching(`burrow-init-${id}`).find((pid) =>
        readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('/bin/sh\0'),
      );
      expect(init, `pid 1 of ${id}`).toBeGreaterThan(0);
      return init!;
    });
    // settled, as instances are when stopped: their processes started, their stocks refilled
    await new Promise((r) => setTimeout(r, 1000));
    const watched = watch(inits, 15_000);
    await watched.started;
    const stops = await Promise.all(
      ids.map((id) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' })),
    );
    for (const res of stops) expect(res.status).toBe(200);
    const seen = await watched.result;
    for (const [i, s] of seen.entries()) {
      expect(s.gone, `pid 1 of ${ids[i]} is gone after its stop`).toBe(true);
      expect(s.orphaned, `pid 1 of ${ids[i]} seen as a zombie of the host's init`).toBe(0);
    }
  }, 120_000);
});
