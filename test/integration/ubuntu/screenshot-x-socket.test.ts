/**
 * An ubuntu instance that moves its own X socket away (issue 35), from a shell inside it: the
 * screenshot over HTTP then fails as a tool failure naming the cause (`computer` answers 200 with
 * `error`, `/screenshot` a 409), never a 500 and never a host path; once the socket is back,
 * screenshots work again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';

let server: TestServer;
let id: string;
beforeAll(async () => {
  server = await testServer();
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  expect(res.status).toBe(200);
  id = ((await res.json()) as { id: string }).id;
});
afterAll(async () => {
  await server?.close();
  expect(instanceProcesses()).toEqual([]);
});

async function bash(command: string): Promise<string> {
  const res = await server.api(`/v1/instance/${id}/bash`, { json: { command } });
  expect(res.status).toBe(200);
  const out = (await res.json()) as { output?: string; error?: string };
  expect(out.error).toBeUndefined();
  return out.output ?? '';
}

/** What a client reads of an answer: status and body, as text. */
async function ask(path: string, json?: unknown): Promise<{ status: number; text: string }> {
  const res = await server.api(path, json === undefined ? { method: 'POST' } : { json });
  return { status: res.status, text: await res.text() };
}

/** No absolute path of the host: the server's data dir, its sandboxes, /proc. */
const HOST_PATH = /\/(var|run|proc|root|srv|opt|usr)\/|burrow-test-|\/sandboxes\//;

describe('an instance that moves its own X socket', () => {
  it('gets a tool failure naming the cause from screenshots, and screenshots again once it is back', async () => {
    expect((await ask(`/v1/instance/${id}/screenshot`)).status).toBe(200);
    const listed = await bash('ls /tmp/.X11-unix/');
    const socket = /X\d+/.exec(listed)?.[0];
    expect(socket).toBeDefined();
    await bash(`mv /tmp/.X11-unix/${socket} /tmp/moved-${socket}`);
    // and ends the server's open connection to the display: the relay it goes through runs
    // inside, as the instance's user, so the next screenshot has to connect anew
    await bash(
      `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q "X11-unix/${socket}" && kill \${p#/proc/}; done; true`,
    );

    const shot = await ask(`/v1/instance/${id}/screenshot`);
    expect(shot).toEqual({ status: 409, text: expect.stringMatching(/^\{"detail":".*display/) });
    expect(shot.text).toMatch(/moved or removed/);
    expect(shot.text).not.toMatch(HOST_PATH);
    const action = await ask(`/v1/instance/${id}/computer`, { action: 'take_screenshot' });
    expect(action.status).toBe(200);
    const result = JSON.parse(action.text) as { error?: string; base64_image?: string };
    expect(result.error).toMatch(/display.*moved or removed/);
    expect(result.base64_image).toBeUndefined();
    expect(action.text).not.toMatch(HOST_PATH);

    await bash(`mv /tmp/moved-${socket} /tmp/.X11-unix/${socket}`);
    const again = await ask(`/v1/instance/${id}/computer`, { action: 'take_screenshot' });
    expect(again.status).toBe(200);
    expect(JSON.parse(again.text)).toHaveProperty('base64_image');
  }, 120_000);
});
