/**
 * What the contract's cases share (operations.test.ts and its cases, operations-cases-*.ts): one
 * real server with a browser and an ubuntu instance for the whole run, the client that talks to
 * it, and the two ways a case shows an invalid input refused (by the client, by the server).
 *
 * `server`, `client`, `browserId` and `ubuntuId` are set by the test file's beforeAll (useServer)
 * and read by the cases through the module's live bindings.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { Burrow, InvalidRequestError } from '../../src/client/index.js';
import { testServer, type TestServer } from '../helpers/server.js';

export let server: TestServer;
export let client: Burrow;
export let browserId = '';
export let ubuntuId = '';

/** Starts the server and its two instances before the file's tests, closes them after. */
export function useServer(): void {
  beforeAll(async () => {
    server = await testServer();
    client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
    browserId = (await client.instances.start({ instance_type: 'browser' })).id;
    ubuntuId = (await client.instances.start({ instance_type: 'ubuntu' })).id;
  }, 120_000);

  afterAll(async () => {
    await client?.close();
    await server?.close();
  });
}

/** A raw request that skips the client's own validation, to see the server's 422. */
export async function raw422(
  path: string,
  init: { body?: unknown; query?: string; method?: string },
) {
  const res = await server.api(path + (init.query ?? ''), {
    method: init.method ?? 'POST',
    ...(init.body !== undefined && { json: init.body }),
  });
  expect(res.status).toBe(422);
  const body = (await res.json()) as { detail: { loc: (string | number)[]; type: string }[] };
  expect(body.detail.length).toBeGreaterThan(0);
  return body.detail;
}

export const pre = async (p: Promise<unknown>) => {
  await expect(p).rejects.toBeInstanceOf(InvalidRequestError);
};

export type Case = { ok: () => Promise<void>; bad: () => Promise<void> };
