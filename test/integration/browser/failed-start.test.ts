/**
 * A browser instance whose Chromium fails while it starts leaves nothing behind: the egress
 * listener that opened beside it (src/server/browser/index.ts start) is closed with the rest.
 * It used to stay open in the server, one listening socket per failed start, and kept a script
 * on the embedded server from exiting. Chromium is made to fail the way an operator flag can:
 * `--version` makes it print its version and exit before DevTools answer. The same holds for a
 * start in a sandbox made ahead (src/server/sandbox/stock.ts), whose listener was opened before
 * the start: the stock's own sandboxes, refilled after it, are all that is left.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { descendants } from '../../../src/internal/process.js';
import { eventually, testServer, type TestServer } from '../../helpers/server.js';

/** Listening servers held by this process (the test server's own port included). */
function listeners(): Server[] {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter(
    (h): h is Server => h?.constructor?.name === 'Server' && (h as Server).listening,
  );
}

/**
 * Processes this test's server started for instances (their wrappers name bubblewrap), but those
 * of the sandboxes `stocked` (made ahead, named by the ids they will give).
 */
function sandboxProcesses(stocked: readonly string[]): number[] {
  return descendants(process.pid).filter((pid) => {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return /bwrap|chromium|unshare/.test(cmd) && !stocked.some((id) => cmd.includes(id));
    } catch {
      return false;
    }
  });
}

describe.each([0, 2])('a start that fails in Chromium (sandbox stock %i)', (sandboxStock) => {
  let server: TestServer;
  beforeAll(async () => {
    // the server reads its settings once, at start (src/server/config.ts)
    const previous = process.env.BURROW_CHROMIUM_FLAGS;
    process.env.BURROW_CHROMIUM_FLAGS = '--version';
    try {
      server = await testServer({ sandboxStock });
    } finally {
      if (previous === undefined) delete process.env.BURROW_CHROMIUM_FLAGS;
      else process.env.BURROW_CHROMIUM_FLAGS = previous;
    }
  });
  afterAll(async () => {
    await server?.close();
  });

  it('answers with the reason and leaves no listener or process behind', async () => {
    await server.sandboxStock.ready();
    const taken = server.sandboxStock.ids();
    expect(taken).toHaveLength(sandboxStock);
    const before = listeners().length;
    const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
    expect(res.status).toBeGreaterThanOrEqual(500);
    const body = (await res.json()) as { detail: string };
    expect(body.detail).toMatch(/Chromium exited/);
    // the answered attempt stays listed as failed; the retried one was never anyone's
    const list = (await (await server.api('/v1/instances')).json()) as {
      id: string;
      status: string;
    }[];
    expect(list.map((i) => i.status)).toEqual(['error']);
    // both attempts ran in the stock's sandboxes, where it had them
    if (sandboxStock > 0) expect(taken).toContain(list[0]!.id);
    // the stock made up for them: as many listeners as before, each of a sandbox it holds now
    await server.sandboxStock.ready();
    await eventually(() => listeners().length === before, 'the egress listeners closed');
    const stocked = server.sandboxStock.ids();
    expect(stocked.filter((id) => taken.includes(id))).toEqual([]);
    await eventually(
      () => sandboxProcesses(stocked).length === 0,
      'no process of the instance left',
    );
  });
});
