/**
 * The embedded default: with no base URL anywhere, sessions share one server started in this
 * process, which stops when the last session (or lease) lets go.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Burrow, embeddedServer, openSession } from 'burrow-sandbox';
import { pidsMatching } from '../../helpers/server.js';

const dataDir = mkdtempSync(join(tmpdir(), 'bse-'));
process.env.BURROW_DATA_DIR = dataDir;
delete process.env.BURROW_BASE_URL;
delete process.env.BURROW_API_KEY;
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const origin = (cdpUrl: string) => new URL(cdpUrl).origin.replace('ws:', 'http:');
const answers = (url: string) =>
  fetch(`${url}/v1/instances`).then(
    () => true,
    () => false,
  );

describe('embedded server', () => {
  it('starts with the first session, is shared by concurrent ones, stops after the last', async () => {
    await using a = await openSession();
    await using b = await openSession({ driver: 'puppeteer' });
    const url = origin(a.cdpUrl);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(origin(b.cdpUrl)).toBe(url);
    await a.page.goto('data:text/html,<title>a</title>');
    await b.page.goto('data:text/html,<title>b</title>');
    expect([await a.page.title(), await b.page.title()]).toEqual(['a', 'b']);

    await a.stop();
    expect(await answers(url)).toBe(true); // b still needs it
    await b.stop();
    expect(await answers(url)).toBe(false);
    // the embedded server stopped with the last session: nothing of either instance is left
    expect(pidsMatching(a.instance.id)).toEqual([]);
    expect(pidsMatching(b.instance.id)).toEqual([]);
  });

  it('a lease keeps it warm between sessions; its key works with a client of your own', async () => {
    const lease = await embeddedServer();
    try {
      let first: string;
      {
        await using session = await openSession();
        first = session.instance.id;
        expect(origin(session.cdpUrl)).toBe(lease.url);
      }
      expect(await answers(lease.url)).toBe(true);
      await using client = new Burrow({ baseUrl: lease.url, apiKey: lease.apiKey });
      expect(await client.instances.get(first)).toMatchObject({ status: 'terminated' });
    } finally {
      await lease.release();
    }
    expect(await answers(lease.url)).toBe(false);
  });
});
