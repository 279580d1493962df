/**
 * A server on a machine without some of the programs instances are made of: `start` answers 503
 * naming what is missing and the apt-get line that fixes it (never a 500), creates nothing, and
 * openSession fails with that message before any instance exists. The programs are hidden by
 * pointing the server at paths that do not exist (BURROW_CHROMIUM, BURROW_XVFB).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow, openSession, ServerError, type Instance } from 'burrow-sandbox';
import { testServer, type TestServer } from '../../helpers/server.js';

const missing = join(mkdtempSync(join(tmpdir(), 'bmt-')), 'not-here');
let server: TestServer;
beforeAll(async () => {
  server = await testServer({ chromiumPath: missing });
});
afterAll(async () => {
  await server?.close();
});

const instances = async () => (await (await server.api('/v1/instances')).json()) as Instance[];

describe('start without the programs an instance type needs', () => {
  it('browser without Chromium: 503 naming Chromium, where it looked and the apt-get line', async () => {
    const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
    expect(res.status).toBe(503);
    expect(res.headers.get('x-burrow-error')).toBe('instance_requirements_missing');
    const { detail } = (await res.json()) as { detail: string };
    expect(typeof detail).toBe('string');
    expect(detail).toContain('browser instances need Chromium');
    expect(detail).toContain(missing);
    expect(detail).toContain('apt-get install -y chromium');
    expect(detail).toContain('BURROW_CHROMIUM');
    expect(await instances()).toEqual([]);
  });

  it('ubuntu without Xvfb: 503 naming Xvfb and xvfb', async () => {
    // a server of its own: settings are read once, at start (src/server/config.ts)
    const before = process.env.BURROW_XVFB;
    process.env.BURROW_XVFB = `${missing}-Xvfb`;
    let noXvfb: TestServer;
    try {
      noXvfb = await testServer({ chromiumPath: missing });
    } finally {
      if (before === undefined) delete process.env.BURROW_XVFB;
      else process.env.BURROW_XVFB = before;
    }
    try {
      const res = await noXvfb.api('/v1/start', { json: { instance_type: 'ubuntu' } });
      expect(res.status).toBe(503);
      expect(res.headers.get('x-burrow-error')).toBe('instance_requirements_missing');
      const { detail } = (await res.json()) as { detail: string };
      expect(detail).toContain('ubuntu instances need Xvfb');
      expect(detail).toContain('apt-get install -y xvfb');
      expect(detail).not.toContain('chromium'); // only what this type lacks
      expect(await (await noXvfb.api('/v1/instances')).json()).toEqual([]);
    } finally {
      await noXvfb.close();
    }
  });

  it('ubuntu with Xvfb but without Chromium: the instance starts, browser/start is the 503', async () => {
    const started = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
    expect(started.status).toBe(200);
    const { id } = (await started.json()) as Instance;
    try {
      const res = await server.api(`/v1/instance/${id}/browser/start`, { json: {} });
      expect(res.status).toBe(503);
      expect(res.headers.get('x-burrow-error')).toBe('instance_requirements_missing');
      const { detail } = (await res.json()) as { detail: string };
      expect(detail).toContain('the desktop browser of ubuntu instances needs Chromium');
      expect(detail).toContain('apt-get install -y chromium');
    } finally {
      await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    }
  });

  it('openSession fails with the same message, and no instance was started', async () => {
    await using client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
    const before = (await instances()).length;
    const err = await openSession({ client }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerError);
    expect((err as ServerError).status).toBe(503);
    expect((err as ServerError).serverCode).toBe('instance_requirements_missing');
    expect((err as Error).message).toContain('apt-get install -y chromium');
    expect((await instances()).length).toBe(before);
  });
});
