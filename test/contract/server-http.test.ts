/**
 * The server's HTTP rules, spoken over plain fetch so that nothing of the client hides them:
 * API key on every route, FastAPI-shaped 422s, `{"detail"}` errors, the state machine, the cap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await testServer({ maxInstances: 2 });
});
afterAll(async () => {
  await server?.close();
});

describe('authentication', () => {
  it('refuses every route without the key, with a detail that does not echo it', async () => {
    for (const [method, path] of [
      ['GET', '/v1/instances'],
      ['GET', '/v1/auth_states'],
      ['POST', '/v1/start'],
      ['GET', '/v1/instance/x'],
      ['POST', '/v1/instance/x/bash'],
    ] as const) {
      const res = await fetch(server.url + path, { method });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(await res.json()).toEqual({ detail: expect.stringContaining('API key') });
    }
  });

  it('refuses a wrong key of any length and never echoes it', async () => {
    for (const key of ['q7', 'test-key-012345678', 'test-key-0123456789-and-more']) {
      const res = await server.api('/v1/instances', { headers: { 'x-api-key': key } });
      expect(res.status).toBe(401);
      expect(await res.text()).not.toContain(key);
    }
  });
});

describe('errors', () => {
  it('unknown instance → 404 with detail', async () => {
    const res = await server.api('/v1/instance/inst_nope');
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: 'Instance inst_nope not found' });
    const stop = await server.api('/v1/instance/inst_nope/stop', { method: 'POST' });
    expect(stop.status).toBe(404);
  });

  it('unknown route → 404 {"detail":"Not Found"}', async () => {
    const res = await server.api('/v1/nothing-here');
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: 'Not Found' });
  });

  it('windows → 400 with the COMPAT wording', async () => {
    const res = await server.api('/v1/start', { json: { instance_type: 'windows' } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      detail: 'windows instances are not available on this server',
    });
  });
});

describe('422 validation errors (FastAPI shape)', () => {
  it('bounds, enums and types on start', async () => {
    const res = await server.api('/v1/start', {
      json: { instance_type: 'mac', timeout_hours: 30, blocked_domains: 'x', resolution: [800] },
    });
    expect(res.status).toBe(422);
    const { detail } = (await res.json()) as {
      detail: { loc: unknown[]; type: string; msg: string }[];
    };
    const by = Object.fromEntries(detail.map((d) => [d.loc.join('.'), d]));
    expect(by['body.instance_type']).toMatchObject({
      type: 'enum',
      msg: "Input should be 'ubuntu', 'browser' or 'windows'",
    });
    expect(by['body.timeout_hours']).toMatchObject({
      type: 'less_than_equal',
      msg: 'Input should be less than or equal to 24',
    });
    expect(by['body.blocked_domains']).toMatchObject({ type: 'list_type' });
    expect(by['body.resolution']).toMatchObject({ type: 'too_short' });
  });

  it('lower bound and wrong types', async () => {
    const res = await server.api('/v1/start', { json: { timeout_hours: 0.001, instance_type: 3 } });
    expect(res.status).toBe(422);
    const { detail } = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
    expect(detail).toContainEqual(
      expect.objectContaining({ loc: ['body', 'timeout_hours'], type: 'greater_than_equal' }),
    );
    expect(detail).toContainEqual(expect.objectContaining({ loc: ['body', 'instance_type'] }));
  });

  it('missing required field', async () => {
    const res = await server.api('/v1/instance/whatever/edit', { json: { path: 'a' } });
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({
      detail: [{ loc: ['body', 'command'], msg: 'Field required', type: 'missing' }],
    });
  });

  it('malformed JSON → json_invalid with the offset', async () => {
    const res = await server.api('/v1/start', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"instance_type": }',
    });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
    expect(body.detail[0]).toMatchObject({ loc: ['body', 18], type: 'json_invalid' });
  });

  it('body that is not an object', async () => {
    const res = await server.api('/v1/instance/x/bash', { json: [1, 2] });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
    expect(body.detail[0]).toMatchObject({ loc: ['body'], type: 'model_attributes_type' });
  });

  it('query parameters are validated under query', async () => {
    const res = await server.api('/v1/instance/x/resume?timeout_hours=abc', { method: 'POST' });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
    expect(body.detail[0]).toMatchObject({ loc: ['query', 'timeout_hours'], type: 'float_type' });
    const missing = await server.api('/v1/instance/x/browser/authenticate', { method: 'POST' });
    expect(missing.status).toBe(422);
    expect(await missing.json()).toEqual({
      detail: [{ loc: ['query', 'auth_state_id'], msg: 'Field required', type: 'missing' }],
    });
  });

  it('computer action union: unknown tag and missing tag', async () => {
    const bad = await server.api('/v1/instance/x/computer', { json: { action: 'fly' } });
    expect(bad.status).toBe(422);
    const b = (await bad.json()) as { detail: { type: string; loc: unknown[] }[] };
    expect(b.detail[0]).toMatchObject({ type: 'union_tag_invalid', loc: ['body'] });
    const none = await server.api('/v1/instance/x/computer', { json: {} });
    const n = (await none.json()) as { detail: { type: string }[] };
    expect(n.detail[0]).toMatchObject({ type: 'union_tag_not_found' });
  });
});
