/**
 * An `ubuntu` session: the bridge calls `browser/start` for the desktop's headful Chromium,
 * connects to it, and on stop calls `browser/stop` before stopping the instance.
 */
import { describe, expect, it } from 'vitest';
import { openSession, type Instance } from 'burrow-sandbox';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { eventually, pidsMatching } from '../../helpers/server.js';

const env = sessionServer('bsu-');

describe('openSession({ instanceType: "ubuntu" })', () => {
  it('starts the desktop browser, drives it, and stops browser and instance', async () => {
    const { server } = env;
    let id = '';
    {
      await using session = await openSession({
        baseUrl: server.url,
        apiKey: server.apiKey,
        instanceType: 'ubuntu',
        driver: 'puppeteer',
      });
      id = session.instance.id;
      expect(session.instance.instance_type).toBe('ubuntu');
      await session.page.goto('data:text/html,<title>desktop</title>');
      expect(await session.page.title()).toBe('desktop');
      expect(await session.currentUrl()).toBe('data:text/html,<title>desktop</title>');
    }
    const after = (await (await server.api(`/v1/instance/${id}`)).json()) as Instance;
    expect(after.status).toBe('terminated');
    await eventually(() => pidsMatching(id).length === 0, 'the instance processes to exit');
  });
});
