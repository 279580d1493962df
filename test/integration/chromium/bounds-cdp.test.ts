/**
 * The DevTools streams of a browser instance are bounded in both directions (issue 18, item 4),
 * and its status stays true when its DevTools connection dies:
 * - a `cdp_url` client's frame past `CDP_MAX_COMMAND_BYTES` closes that client (1009), not the
 *   browser's pipe (Chromium shuts a pipe past 100 MiB and stays up, deaf);
 * - a client that does not read is closed (1008) once 64 MiB wait for it, while the other
 *   clients of the browser are answered;
 * - Chromium's pipe flooded (from the host, as root: no seccomp in the way) or sent something
 *   that is not CDP kills that Chromium and the instance answers `error`, never 500.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdpClient } from '../../helpers/cdp-client.js';
import { floodFromHost } from '../../helpers/flood.js';
import {
  eventually,
  instancePids,
  testServer,
  type TestServer,
  startBrowser as startBrowserOn,
} from '../../helpers/server.js';
import { CDP_MAX_COMMAND_BYTES } from '../../../src/api/cdp-limits.js';

const MiB = 1024 * 1024;
const EPIPE = 32;

let server: TestServer;
/** The server's log lines. */
const logged: string[] = [];
/** Called with each log line as the server writes it. */
let onLine: ((line: string) => void) | undefined;
beforeAll(async () => {
  server = await testServer({
    maxInstances: 4,
    logDestination: {
      write: (line) => {
        logged.push(line);
        onLine?.(line);
        process.stdout.write(line);
      },
    },
  });
});
afterAll(async () => {
  await server?.close();
});

const startBrowser = () => startBrowserOn(server);

/** The Chromium browser process (not a helper) of instance `id`. */
function browserProcess(id: string): number | undefined {
  return instancePids(id).find((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return (
        argv[0] === '/usr/lib/chromium/chromium' &&
        argv.includes('--remote-debugging-pipe') &&
        !argv.some((a) => a.startsWith('--type='))
      );
    } catch {
      return false;
    }
  });
}

async function status(id: string): Promise<string> {
  const res = await server.api(`/v1/instance/${id}`);
  return ((await res.json()) as { status: string }).status;
}

const stop = (id: string) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' });

describe('cdp_url clients', () => {
  it('a frame past the bound closes that client (1009); the browser keeps answering', async () => {
    const { id, cdpUrl } = await startBrowser();
    const client = await cdpClient(cdpUrl);
    // past the bound and past Chromium's own 100 MiB: with no bound it would deafen the pipe
    const expression = 'x'.repeat(Math.max(CDP_MAX_COMMAND_BYTES, 100 * MiB) + MiB);
    client.send('Runtime.evaluate', { expression });
    expect((await client.closed).code).toBe(1009);
    const shot = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
    expect(shot.status).toBe(200);
    const other = await cdpClient(cdpUrl);
    expect(await other.call('Browser.getVersion')).toHaveProperty('result.product');
    other.ws.close();
    expect(await status(id)).toBe('running');
    await stop(id);
  });

  it('a client that does not read is closed (1008) at its bound; the others are answered', async () => {
    const { id, cdpUrl } = await startBrowser();
    const slow = await cdpClient(cdpUrl);
    const { result } = (await slow.call('Target.getTargets')) as {
      result: { targetInfos: { targetId: string; type: string }[] };
    };
    const page = result.targetInfos.find((t) => t.type === 'page')!;
    const attached = (await slow.call('Target.attachToTarget', {
      targetId: page.targetId,
      flatten: true,
    })) as { result: { sessionId: string } };
    const before = process.memoryUsage().rss;
    // it stops reading, and asks for 320 MiB of replies
    (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const expression = "'x'.repeat(8 * 1024 * 1024)";
    for (let i = 0; i < 40; i++) {
      slow.send('Runtime.evaluate', { expression, returnByValue: true }, attached.result.sessionId);
    }
    // once the server closes it, it reads again, within the grace its socket is given (5 s):
    // what was queued, then the reason; resumed as the server says so, since on a busy machine
    // the loop below may see it late
    const CUT = 'closing a CDP client that does not read';
    const resume = () => (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    onLine = (line) => void (line.includes(CUT) && resume());
    // meanwhile another client of the same browser is answered promptly
    const other = await cdpClient(cdpUrl);
    const cut = () => logged.some((l) => l.includes(CUT));
    while (!cut()) {
      const t0 = performance.now();
      expect(await other.call('Browser.getVersion')).toHaveProperty('result.product');
      expect(performance.now() - t0).toBeLessThan(5000);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * MiB + 150 * MiB);
    onLine = undefined;
    expect(await slow.closed).toEqual({ code: 1008, reason: expect.stringMatching(/unread/) });
    expect(await other.call('Browser.getVersion')).toHaveProperty('result.product');
    other.ws.close();
    expect(await status(id)).toBe('running');
    await stop(id);
  }, 120_000);
});

describe("a browser instance's DevTools pipe", () => {
  it('flooded past its bound: that Chromium is killed and the instance says error, not 500', async () => {
    const { id } = await startBrowser();
    const pid = browserProcess(id);
    expect(pid).toBeDefined();
    const before = process.memoryUsage().rss;
    const r = await floodFromHost(pid!, 4, 600 * MiB, Buffer.from('{"method":"'));
    expect(r.via).toBe('pidfd_getfd');
    expect(r.writeErrno).toBe(EPIPE);
    expect(r.written).toBeLessThan(256 * MiB + 16 * MiB);
    expect(process.memoryUsage().rss - before).toBeLessThan(256 * MiB + 150 * MiB);
    await eventually(async () => (await status(id)) === 'error', 'the instance in error');
    const shot = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
    expect(shot.status).toBe(400);
    await eventually(() => browserProcess(id) === undefined, 'that Chromium gone');
  });

  it('sent a message that is not CDP: the same, and the server lives on', async () => {
    const { id } = await startBrowser();
    const r = await floodFromHost(browserProcess(id)!, 4, 0, Buffer.from('not json\0'));
    expect(r.via).toBe('pidfd_getfd');
    await eventually(async () => (await status(id)) === 'error', 'the instance in error');
    const shot = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
    expect(shot.status).toBe(400);
    const fresh = await startBrowser();
    expect(await status(fresh.id)).toBe('running');
    await stop(fresh.id);
  });
});
