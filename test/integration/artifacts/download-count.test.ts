/**
 * The number of downloads one instance lists and keeps is bounded, not only their bytes
 * (ISOLATION.md, "Resources"; `artifactMaxDownloads`): a `cdp_url` holder navigates a tab to an
 * `application/octet-stream` URL again and again (Chromium's limiter of automatic downloads does
 * not apply to `Page.navigate`). Each download used to be an entry in the server's memory and,
 * after the stop, a file on the host: here the instance makes three times the cap, and the
 * listing, the files kept after its stop and the log's lines about it stay bounded.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LOG_BUDGET } from '../../../src/internal/log-budget.js';
import { cdpClient } from '../../helpers/cdp-client.js';
import { eventually } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const CAP = 8;
let site: Server;
let origin = '';
let served = 0;
const logs: string[] = [];
const dataDir = mkdtempSync(join(tmpdir(), 'burrow-downloads-'));

beforeAll(async () => {
  site = createServer((_req, res) => {
    served++;
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end('x'.repeat(100));
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
});

// registered before the server's: runs after it closed
afterAll(async () => {
  site.closeAllConnections();
  await new Promise((r) => site.close(r));
  rmSync(dataDir, { recursive: true, force: true });
});

const server = useServer(
  {
    dataDir,
    artifactMaxDownloads: CAP,
    logDestination: { write: (line) => void logs.push(line) },
  },
  { timeout: 180_000 },
);
const instance = useInstance(server, 'browser', {}, 180_000);

const listed = async (): Promise<number> => {
  const res = await server.api(`/v1/instance/${instance.id}/downloads`);
  expect(res.status).toBe(200);
  return ((await res.json()) as unknown[]).length;
};

describe('downloads by navigation from a cdp_url client', () => {
  it('lists and keeps at most artifactMaxDownloads of them', async () => {
    const cdp = await cdpClient(instance.cdpUrl);
    const made = await cdp.call('Target.createTarget', { url: 'about:blank' });
    const targetId = (made.result as { targetId: string }).targetId;
    const attached = await cdp.call('Target.attachToTarget', { targetId, flatten: true });
    const sessionId = (attached.result as { sessionId: string }).sessionId;
    // one navigation at a time: a navigation begun before the last one's request left Chromium
    // cancels that request (CI: 23 of 24 served once), and the attack must run in full
    for (let i = 0; i < 3 * CAP; i++) {
      await cdp.call('Page.navigate', { url: `${origin}/x.bin?${i}` }, sessionId);
      await eventually(() => served > i, `the site served download ${i + 1}`);
    }
    await eventually(
      () => logs.filter((l) => l.includes('neither listed nor kept')).length > 0,
      'the log says a download was not listed',
    );
    // the server lists the first CAP of them only
    expect(await listed()).toBe(CAP);
    cdp.ws.close();

    const stop = await server.api(`/v1/instance/${instance.id}/stop`, { method: 'POST' });
    expect(stop.status).toBe(200);
    expect(await listed()).toBeLessThanOrEqual(CAP);
    const runs = readdirSync(join(dataDir, 'instances')).filter((d) => d.startsWith('run-'));
    const kept = runs.flatMap((run) => {
      try {
        return readdirSync(join(dataDir, 'instances', run, 'retained', instance.id));
      } catch {
        return [];
      }
    });
    expect(kept.length).toBe(CAP);
    const notListed = logs.filter((l) => l.includes('neither listed nor kept'));
    expect(notListed.length).toBeLessThanOrEqual(DEFAULT_LOG_BUDGET.perKind);
  }, 180_000);
});
