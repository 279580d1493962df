/**
 * A browser instance whose Chromium fails while it starts leaves nothing behind: the egress
 * listener that opened beside it (src/server/browser/index.ts start) is closed with the rest.
 * It used to stay open in the server, one listening socket per failed start, and kept a script
 * on the embedded server from exiting. Chromium is made to fail the way an operator flag can:
 * `--version` makes it print its version and exit before DevTools answer.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { descendants } from '../../src/internal/process.js';
import { eventually, testServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  // the server reads its settings once, at start (src/server/config.ts)
  const previous = process.env.BURROW_CHROMIUM_FLAGS;
  process.env.BURROW_CHROMIUM_FLAGS = '--version';
  try {
    server = await testServer();
  } finally {
    if (previous === undefined) delete process.env.BURROW_CHROMIUM_FLAGS;
    else process.env.BURROW_CHROMIUM_FLAGS = previous;
  }
});
afterAll(async () => {
  await server?.close();
});

/** Listening servers held by this process (the test server's own port included). */
function listeners(): Server[] {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter(
    (h): h is Server => h?.constructor?.name === 'Server' && (h as Server).listening,
  );
}

/** Processes this test's server started for instances (their wrappers name bubblewrap). */
function sandboxProcesses(): number[] {
  return descendants(process.pid).filter((pid) => {
    try {
      return /bwrap|chromium|unshare/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
    } catch {
      return false;
    }
  });
}

describe('a start that fails in Chromium', () => {
  it('answers with the reason and leaves no listener or process behind', async () => {
    const before = listeners().length;
    const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
    expect(res.status).toBeGreaterThanOrEqual(500);
    const body = (await res.json()) as { detail: string };
    expect(body.detail).toMatch(/Chromium exited/);
    await eventually(() => listeners().length === before, 'the egress listener closed');
    // the answered attempt stays listed as failed; the retried one was never anyone's
    const list = (await (await server.api('/v1/instances')).json()) as { status: string }[];
    expect(list.map((i) => i.status)).toEqual(['error']);
    await eventually(() => sandboxProcesses().length === 0, 'no process of the instance left');
  });
});
