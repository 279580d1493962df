/**
 * The instance state machine with real Chromium behind it: deploying → running ⇄ paused →
 * terminated, the live-instance cap, 400s that say why, and processes gone after stop.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { processState } from '../../../src/internal/process.js';
import {
  eventually,
  instanceChromium,
  instanceFrozen,
  instancePids,
} from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

const server = useServer({ maxInstances: 2 });

/** Instances a test started: stopped after each test, so one failure cannot hold the cap. */
const started: string[] = [];
afterEach(async () => {
  for (const id of started.splice(0))
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
});

async function start(body: unknown = { instance_type: 'browser' }) {
  const res = await server.api('/v1/start', { json: body });
  const json = (await res.json()) as Record<string, unknown>;
  if (typeof json.id === 'string') started.push(json.id);
  return { res, body: json };
}

describe('browser instance lifecycle', () => {
  it('start → running, get and list show it, stop → terminated and still listed', async () => {
    const { res, body: inst } = await start({ instance_type: 'browser', resolution: [800, 600] });
    expect(res.status).toBe(200);
    expect(inst).toMatchObject({
      instance_type: 'browser',
      status: 'running',
      resolution: [800, 600],
    });
    expect(String(inst.id)).toMatch(/^inst_[0-9a-f]{16}$/);
    expect(new Date(String(inst.launch_time)).toISOString()).toBe(inst.launch_time);
    const id = String(inst.id);
    expect(instancePids(id).length).toBeGreaterThan(0); // Chromium runs with the instance's dir

    const got = (await (await server.api(`/v1/instance/${id}`)).json()) as typeof inst;
    // the same record, but for the seconds left, which count down between the two answers
    expect(inst.time_left_seconds).toBeGreaterThan(3_500);
    expect(Math.abs(Number(got.time_left_seconds) - Number(inst.time_left_seconds))).toBeLessThan(
      3,
    );
    expect({ ...got, time_left_seconds: 0 }).toEqual({ ...inst, time_left_seconds: 0 });
    const list = (await (await server.api('/v1/instances')).json()) as { id: string }[];
    expect(list.map((i) => i.id)).toContain(id);

    const stop = await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    expect(stop.status).toBe(200);
    expect(await stop.json()).toEqual({ status: 'terminated' });
    // stop answers once the instance is unusable; its processes go right after
    await eventually(() => instancePids(id).length === 0, 'every process of the instance to exit');
    const after = (await (await server.api(`/v1/instance/${id}`)).json()) as { status: string };
    expect(after.status).toBe('terminated');

    // stopping again is harmless; using it is a 400 that says why
    expect((await server.api(`/v1/instance/${id}/stop`, { method: 'POST' })).status).toBe(200);
    const shot = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
    expect(shot.status).toBe(400);
    expect(await shot.json()).toEqual({ detail: `Instance ${id} is terminated` });
  });

  it('pause freezes the processes, ops answer 400, resume thaws and restarts the clock', async () => {
    const { body: inst } = await start();
    const id = String(inst.id);
    const pause = await server.api(`/v1/instance/${id}/pause`, { method: 'POST' });
    expect(await pause.json()).toEqual({ status: 'paused' });
    // the cgroup freezer holds every process: frozen tasks sleep uninterruptibly (D)
    expect(instanceFrozen(id)).toBe(true);
    const states = instancePids(id).map((pid) => processState(pid));
    expect(states.length).toBeGreaterThan(0);
    expect(states.every((s) => ['D', 'T', 'X', ''].includes(s))).toBe(true);

    const shot = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
    expect(shot.status).toBe(400);
    expect(await shot.json()).toEqual({ detail: `Instance ${id} is paused` });

    const resume = await server.api(`/v1/instance/${id}/resume?timeout_hours=2`, {
      method: 'POST',
    });
    expect(resume.status).toBe(200);
    expect(await resume.json()).toMatchObject({ id, status: 'running' });
    expect(instanceFrozen(id)).toBe(false);
    expect(instancePids(id).map((pid) => processState(pid))).not.toContain('T');
    const shot2 = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
    expect(shot2.status).toBe(200);
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  });

  it('past the cap of live instances start answers 429 with Retry-After', async () => {
    const a = await start();
    const b = await start();
    expect(a.res.status).toBe(200);
    expect(b.res.status).toBe(200);
    const c = await start();
    expect(c.res.status).toBe(429);
    expect(c.res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(c.body.detail).toMatch(/capacity/);
    await server.api(`/v1/instance/${String(a.body.id)}/stop`, { method: 'POST' });
    const d = await start();
    expect(d.res.status).toBe(200);
    await server.api(`/v1/instance/${String(b.body.id)}/stop`, { method: 'POST' });
    await server.api(`/v1/instance/${String(d.body.id)}/stop`, { method: 'POST' });
  });

  it('an operation the type lacks is a 400 naming the type', async () => {
    const { body: inst } = await start();
    const id = String(inst.id);
    const res = await server.api(`/v1/instance/${id}/bash`, { json: { command: 'ls' } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ detail: 'bash is not available on browser instances' });
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  });

  it('Chromium dying on its own puts the instance in error', async () => {
    const { body: inst } = await start();
    const id = String(inst.id);
    const chromium = instanceChromium(id);
    expect(chromium).toBeDefined();
    process.kill(chromium!, 'SIGKILL');
    await eventually(async () => {
      const r = (await (await server.api(`/v1/instance/${id}`)).json()) as { status: string };
      return r.status === 'error';
    }, 'status error');
    await eventually(() => instancePids(id).length === 0, 'no processes left');
  });
});

describe('expiry', () => {
  it(
    'terminates an instance after timeout_hours (0.01 h = 36 s)',
    { timeout: 60_000 },
    async () => {
      const { body: inst } = await start({ instance_type: 'browser', timeout_hours: 0.01 });
      const id = String(inst.id);
      await eventually(
        async () => {
          const r = (await (await server.api(`/v1/instance/${id}`)).json()) as { status: string };
          return r.status === 'terminated';
        },
        'expiry',
        50_000,
      );
      await eventually(() => instancePids(id).length === 0, 'processes gone after expiry');
    },
  );
});
