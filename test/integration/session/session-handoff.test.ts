/**
 * Hand-off through the bridge and the MCP tools (issue 23): `session.handoff()` on a Playwright
 * session resolves once the person (a local headless Chromium) typed a code into the remote page
 * through the live view and pressed Done; on a Puppeteer session an unanswered hand-off rejects
 * with `HandoffError` (`handoff_expired`). Over `/mcp`, `handoff_request` / `handoff_wait` do the
 * same for an agent, and `instance_extend` moves the deadline.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow, HandoffError, openSession, type Instance } from 'burrow-sandbox';
import { clientBackend } from '../../../src/cli/mcp-backend.js';
import { createMcpSession } from '../../../src/server/mcp/tools.js';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { LAYOUT, startPlayground, type Playground } from '../../helpers/computer.js';

const env = sessionServer('bsh-');
let site: Playground;
let person: Browser;

beforeAll(async () => {
  [site, person] = await Promise.all([
    startPlayground(),
    chromium.launch({
      executablePath: '/usr/lib/chromium/chromium',
      args: ['--no-sandbox', '--disable-background-networking', '--no-first-run'],
    }),
  ]);
});
afterAll(async () => {
  await person?.close();
  await site?.close();
});

/** The person: opens the hand-off page, checks the message, types `code` into the field, Done. */
async function actAsPerson(url: string, message: string, code: string): Promise<Page> {
  const tab = await person.newPage({ viewport: { width: 1100, height: 800 } });
  await tab.goto(url);
  expect(await tab.locator('#burrow-handoff-message').textContent()).toBe(message);
  await tab.waitForSelector('body[data-frames]', { timeout: 30_000 });
  const box = (await tab.locator('canvas').boundingBox())!;
  const [w, h] = await tab.evaluate(() => {
    const c = document.querySelector('canvas')!;
    return [c.width, c.height];
  });
  await tab.mouse.click(
    box.x + ((LAYOUT.field.x + 40) * box.width) / w,
    box.y + ((LAYOUT.field.y + 15) * box.height) / h,
  );
  await tab.keyboard.type(code);
  return tab;
}

describe('session.handoff()', () => {
  it('Playwright: resolves once the person pressed Done; what they typed is in the page', async () => {
    await using session = await openSession({ ...env.remote, resolution: [800, 600] });
    await session.page.goto(site.url);
    const message = 'Type the code we sent to your phone, then press Done';
    let tab: Page | undefined;
    const result = await session.handoff({
      message,
      timeoutMs: 120_000,
      onUrl: (url) => {
        // the person acts while the script waits
        void (async () => {
          tab = await actAsPerson(url, message, '731904');
          await expect.poll(() => session.page.inputValue('#field')).toBe('731904');
          await tab.locator('#burrow-handoff-done').click();
        })();
      },
    });
    expect(result).toMatchObject({ status: 'done' });
    expect(result.url).toContain(`/stream/${session.id}/`);
    expect(await session.page.inputValue('#field')).toBe('731904');
    await tab?.close();
  });

  it('Puppeteer: an unanswered hand-off rejects with HandoffError (expired)', async () => {
    await using session = await openSession({ ...env.remote, driver: 'puppeteer' });
    let shown = '';
    const err = await session
      .handoff({ message: 'Nobody comes', timeoutMs: 1_500, onUrl: (url) => void (shown = url) })
      .catch((e: unknown) => e);
    expect(shown).toMatch(/token=/);
    expect(err).toBeInstanceOf(HandoffError);
    expect(err).toMatchObject({ code: 'handoff_expired', instanceId: session.id });
    // the page is gone with it; the session and its instance run on
    expect((await fetch(shown)).status).toBe(401);
    expect(await session.page.evaluate(() => 1 + 1)).toBe(2);
    await expect(session.handoff({ message: 'x', timeoutMs: 10 })).rejects.toMatchObject({
      code: 'invalid_option',
    });
  });
});

describe('MCP tools', () => {
  const texts = (r: CallToolResult) =>
    r.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join('\n');

  it('handoff_request, handoff_wait and instance_extend over /mcp', async () => {
    const client = new Client({ name: 'burrow-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${env.server.url}/mcp`), {
      requestInit: { headers: { 'x-api-key': env.server.apiKey } },
    });
    await client.connect(transport);
    try {
      const call = async (name: string, args: Record<string, unknown> = {}) => {
        const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
        if (r.isError) throw new Error(`${name} failed: ${texts(r)}`);
        return texts(r);
      };
      await call('instance_start', { instance_type: 'browser', resolution: [800, 600] });
      await call('browser_navigate', { url: site.url });
      const asked = await call('handoff_request', { message: 'Solve the puzzle' });
      const url = /(http:\/\/\S+token=\S+)/.exec(asked)![1]!;
      const { handoff_id } = JSON.parse(asked.slice(asked.indexOf('{'))) as { handoff_id: string };
      expect(await call('handoff_wait', { handoff_id, wait_seconds: 0 })).toContain(': pending');

      const tab = await actAsPerson(url, 'Solve the puzzle', 'ok');
      const waited = call('handoff_wait', { handoff_id, wait_seconds: 60 });
      await tab.locator('#burrow-handoff-done').click();
      expect(await waited).toContain(`Hand-off ${handoff_id}: done`);
      await tab.close();

      const extended = await call('instance_extend', { timeout_hours: 2 });
      const inst = JSON.parse(
        extended.slice(extended.indexOf('{'), extended.lastIndexOf('}') + 1),
      ) as Instance;
      expect(inst.time_left_seconds).toBeGreaterThan(2 * 3_600 - 30);

      // bad input: a tool error naming the field, not a crash
      const bad = (await client.callTool({
        name: 'instance_extend',
        arguments: { timeout_hours: 99 },
      })) as CallToolResult;
      expect(bad.isError).toBe(true);
      expect(texts(bad)).toMatch(/timeout_hours/);
      const unknown = (await client.callTool({
        name: 'handoff_wait',
        arguments: { handoff_id: 'ho_nope', wait_seconds: 0 },
      })) as CallToolResult;
      expect(unknown.isError).toBe(true);
      expect(texts(unknown)).toContain('handoff_not_found');
    } finally {
      await transport.terminateSession();
      await client.close();
    }
  });

  it('the same tools over the typed client, as `burrow mcp` on stdio runs them', async () => {
    const api = new Burrow({ ...env.remote, maxRetries: 0 });
    const session = createMcpSession({ backend: clientBackend(api), version: 'test' });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await session.server.connect(a);
    const client = new Client({ name: 'burrow-test', version: '1.0.0' });
    await client.connect(b);
    try {
      const call = async (name: string, args: Record<string, unknown> = {}) =>
        (await client.callTool({ name, arguments: args })) as CallToolResult;
      expect((await call('instance_start', { instance_type: 'browser' })).isError).toBeFalsy();
      const asked = texts(await call('handoff_request', { message: 'Check', timeout_seconds: 30 }));
      const url = new URL(/(http:\/\/\S+token=\S+)/.exec(asked)![1]!);
      const { handoff_id } = JSON.parse(asked.slice(asked.indexOf('{'))) as { handoff_id: string };
      const waited = call('handoff_wait', { handoff_id, wait_seconds: 60 });
      // the person's Done, as the page sends it
      const done = await fetch(`${url.origin}${url.pathname}handoff/done${url.search}`, {
        method: 'POST',
      });
      expect(done.status).toBe(200);
      expect(texts(await waited)).toContain(`Hand-off ${handoff_id}: done`);
      expect(texts(await call('instance_extend', { timeout_hours: 1.5 }))).toMatch(
        /now expires at/,
      );
      const bad = await call('handoff_request', { message: '' });
      expect(bad.isError).toBe(true);
      expect(texts(bad)).toContain('message');
    } finally {
      await client.close();
      await session.close();
      await api.close();
    }
  });
});
