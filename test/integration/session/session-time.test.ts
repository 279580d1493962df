/**
 * Session time (issue 23): the idle timeout stops an instance nobody uses (`end_reason: "idle"`)
 * and leaves alone one with a CDP client or API calls; `extend` moves the deadline that
 * `GET /v1/instance/{id}` shows; bad values get 422s; the bridge's open session keeps its
 * instance alive and `session.extend()` moves its deadline.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';
import { WebSocket } from 'ws';
import { describe, expect, it } from 'vitest';
import { Burrow, openSession, type Instance } from 'burrow-sandbox';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { eventually } from '../../helpers/server.js';

const env = sessionServer('bst-');
const client = () => new Burrow({ ...env.remote, maxRetries: 0 });

async function get(id: string): Promise<Instance> {
  return (await (await env.server.api(`/v1/instance/${id}`)).json()) as Instance;
}

/** Peeks at an instance's row without counting as its activity (the listing names no instance). */
async function peek(id: string): Promise<Instance> {
  const all = (await (await env.server.api('/v1/instances')).json()) as Instance[];
  return all.find((i) => i.id === id)!;
}

describe('idle timeout', () => {
  it('stops an instance with no client and no calls, as idle', async () => {
    await using c = client();
    // the idle clock starts when the instance is ready, between the request and its answer: the
    // stop comes at least 2 s after the request left (the answer may come late on a busy machine)
    const asked = Date.now();
    const inst = await c.instances.start({ instance_type: 'browser', idle_timeout_seconds: 2 });
    expect(inst.idle_timeout_seconds).toBe(2);
    await eventually(
      async () => (await peek(inst.id)).status === 'terminated',
      'idle stop',
      20_000,
    );
    expect(Date.now() - asked).toBeGreaterThanOrEqual(2_000);
    const row = await get(inst.id);
    expect(row).toMatchObject({ status: 'terminated', end_reason: 'idle' });
    expect(row.time_left_seconds).toBeUndefined();
  });

  it('keeps an instance while a CDP client is connected, and while API calls come', async () => {
    await using c = client();
    const inst = await c.instances.start({ instance_type: 'browser', idle_timeout_seconds: 2 });
    const { cdp_url } = await c.browser.cdpUrl(inst.id);
    const browser = await chromium.connectOverCDP(cdp_url);
    await sleep(5_000);
    expect((await peek(inst.id)).status).toBe('running');
    await browser.close(); // over CDP: a disconnect
    // calls for the instance count as activity
    for (let i = 0; i < 5; i++) {
      await sleep(900);
      expect((await c.instances.get(inst.id)).status).toBe('running');
    }
    // and then nothing: it goes
    await eventually(async () => (await peek(inst.id)).end_reason === 'idle', 'idle stop', 20_000);
  });

  it('keeps an instance while a live-view client is connected', async () => {
    await using c = client();
    const inst = await c.instances.start({ instance_type: 'browser', idle_timeout_seconds: 2 });
    const page = new URL((await c.instance.streamUrl(inst.id)).stream_url);
    const ws = new WebSocket(`ws://${page.host}${page.pathname}ws${page.search}`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    await sleep(5_000);
    expect((await peek(inst.id)).status).toBe('running');
    ws.close();
    await eventually(async () => (await peek(inst.id)).end_reason === 'idle', 'idle stop', 20_000);
  });

  it('refuses bad idle timeouts with a 422 naming the field', async () => {
    for (const bad of [0, -1, 1.5, 'x', 86_401]) {
      const res = await env.server.api('/v1/start', {
        json: { instance_type: 'browser', idle_timeout_seconds: bad },
      });
      expect(res.status).toBe(422);
      expect(JSON.stringify(await res.json())).toContain('idle_timeout_seconds');
    }
  });
});

describe('extend and the time left', () => {
  it('moves the deadline shown by GET; counts from now', async () => {
    await using c = client();
    const inst = await c.instances.start({ instance_type: 'browser', timeout_hours: 1 });
    const first = await c.instances.get(inst.id);
    const firstAt = Date.parse(first.expires_at!);
    expect(Math.abs(firstAt - Date.parse(first.launch_time) - 3_600_000)).toBeLessThan(10_000);
    expect(first.time_left_seconds).toBeGreaterThan(3_500);
    expect(first.time_left_seconds).toBeLessThanOrEqual(3_600);

    const extended = await c.instances.extend(inst.id, { timeout_hours: 5 });
    expect(Date.parse(extended.expires_at!) - Date.now()).toBeGreaterThan(5 * 3_600_000 - 10_000);
    const after = await c.instances.get(inst.id);
    expect(after.expires_at).toBe(extended.expires_at);
    expect(after.time_left_seconds).toBeGreaterThan(5 * 3_600 - 10);
    // from now, not added: a shorter value shortens it
    const shorter = await c.instances.extend(inst.id, { timeout_hours: 0.5 });
    expect(shorter.time_left_seconds).toBeLessThanOrEqual(1_800);
    expect(shorter.time_left_seconds).toBeGreaterThan(1_790);

    // bad values: 422 naming the field (and the maximum)
    for (const body of [{ timeout_hours: 0 }, { timeout_hours: 25 }, { timeout_hours: 'x' }, {}]) {
      const res = await env.server.api(`/v1/instance/${inst.id}/extend`, { json: body });
      expect(res.status).toBe(422);
      const text = JSON.stringify(await res.json());
      expect(text).toContain('timeout_hours');
      if (body.timeout_hours === 25) expect(text).toContain('24');
    }
    await c.instances.stop(inst.id);
    // an ended instance cannot be extended: 410
    const gone = await env.server.api(`/v1/instance/${inst.id}/extend`, {
      json: { timeout_hours: 1 },
    });
    expect(gone.status).toBe(410);
    expect((await get(inst.id)).expires_at).toBeUndefined();
  });

  it('a bridge session keeps its idle instance alive, and extends it', async () => {
    await using session = await openSession({ ...env.remote, idleTimeoutSeconds: 2 });
    await sleep(5_000); // only waits: its CDP connection holds the instance
    expect((await peek(session.id)).status).toBe('running');
    const inst = await session.extend(3);
    expect(inst.time_left_seconds).toBeGreaterThan(3 * 3_600 - 10);
    expect((await peek(session.id)).expires_at).toBe(inst.expires_at);
    await expect(session.extend(30)).rejects.toThrow(/24/);
    await session.stop();
    expect((await peek(session.id)).end_reason).toBe('stopped');
  });
});
