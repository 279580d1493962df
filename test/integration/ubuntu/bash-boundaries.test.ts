/**
 * A bash call's answer holds that call's output and nothing else (issue 35, item 2): a background
 * process that goes on writing after its call returned used to land in the next call's answer.
 * The call boundary is the sync token each call ends with (src/server/ubuntu/tools/bash.ts):
 * bytes after it while no command runs are dropped and counted in a `system` note.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServer, type TestServer } from '../../helpers/server.js';

let server: TestServer;
let id = '';
beforeAll(async () => {
  server = await testServer();
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  expect(res.status).toBe(200);
  id = ((await res.json()) as { id: string }).id;
}, 180_000);
afterAll(async () => {
  await server?.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  await server?.close();
});

const bash = async (body: Record<string, unknown>) => {
  const res = await server.api(`/v1/instance/${id}/bash`, { json: body });
  expect(res.status).toBe(200);
  return (await res.json()) as { output?: string; error?: string; system?: string };
};

describe('bash call boundaries', () => {
  it("a background writer's later output is not the next call's", async () => {
    const first = await bash({
      command:
        '(for i in 1 2 3; do sleep 0.3; echo LATE-$i; echo LATE-ERR-$i >&2; done) & echo now',
      session: 3,
    });
    expect(first.output).toBe('now\n');
    await sleep(2000); // the background loop has written everything
    const next = await bash({ command: 'echo next', session: 3 });
    expect(next.output).toBe('next\n');
    expect(next.error ?? '').toBe('');
    expect(next.system).toMatch(/bytes written while no command ran/);
  });
});
