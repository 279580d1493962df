/**
 * The contract: every row of the operation table has a client method and a server route, and
 * every operation works through the real client against the real server (the client checks each
 * response against its schema, so a wrong shape fails as ContractError). Each operation also gets
 * at least one invalid input: refused before sending by the client, and by the server with its
 * FastAPI-shaped 422 (or the 404/400 a path-only operation can produce).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  BadRequestError,
  Burrow,
  InvalidRequestError,
  NotFoundError,
} from '../../src/client/index.js';
import { operationIds, operations, type OperationId } from '../../src/api/index.js';
import { testServer, type TestServer } from '../helpers/server.js';
import { makeZip, testExtension } from '../helpers/zip.js';

let server: TestServer;
let client: Burrow;
let browserId = '';
let ubuntuId = '';
let notebookId = '';
let cellId = '';
let authStateId = '';
let downloadId = '';
let recordingId = '';
let handoffId = '';
let extensionId = '';

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

/** A raw request that skips the client's own validation, to see the server's 422. */
async function raw422(path: string, init: { body?: unknown; query?: string; method?: string }) {
  const res = await server.api(path + (init.query ?? ''), {
    method: init.method ?? 'POST',
    ...(init.body !== undefined && { json: init.body }),
  });
  expect(res.status).toBe(422);
  const body = (await res.json()) as { detail: { loc: (string | number)[]; type: string }[] };
  expect(body.detail.length).toBeGreaterThan(0);
  return body.detail;
}

const pre = async (p: Promise<unknown>) => {
  await expect(p).rejects.toBeInstanceOf(InvalidRequestError);
};

type Case = { ok: () => Promise<void>; bad: () => Promise<void> };

// Ordered: later cases use what earlier ones made (the auth state, the notebook and its cell).
const cases: Record<OperationId, Case> = {
  start: {
    ok: async () => {
      const inst = await client.instances.start({
        instance_type: 'browser',
        resolution: [640, 480],
      });
      expect(inst.status).toBe('running');
      expect(inst.resolution).toEqual([640, 480]);
      await client.instances.stop(inst.id);
    },
    bad: async () => {
      await pre(client.instances.start({ timeout_hours: 25 }));
      await raw422('/v1/start', { body: { timeout_hours: 0 } });
    },
  },
  getInstance: {
    ok: async () => expect((await client.instances.get(browserId)).id).toBe(browserId),
    bad: async () => {
      await expect(client.instances.get('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.instances.get('..'));
    },
  },
  listInstances: {
    ok: async () => expect((await client.instances.list()).map((i) => i.id)).toContain(ubuntuId),
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.instances.list()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
  listAuthStates: {
    ok: async () => expect(Array.isArray(await client.authStates.list())).toBe(true),
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.authStates.list()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
  screenshot: {
    ok: async () => {
      const png = Buffer.from((await client.instance.screenshot(browserId)).base64_image, 'base64');
      expect(png.subarray(1, 4).toString()).toBe('PNG');
    },
    bad: async () => {
      await expect(client.instance.screenshot('inst_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
    },
  },
  streamUrl: {
    ok: async () => {
      const { stream_url } = await client.instance.streamUrl(browserId);
      expect(stream_url).toContain(`/stream/${browserId}/`);
      expect(stream_url).toMatch(/token=/);
    },
    bad: async () => {
      await expect(client.instance.streamUrl('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  computer: {
    ok: async () => {
      const r = await client.instance.computer(browserId, {
        action: 'move_mouse',
        coordinates: [10, 20],
        screenshot: false,
      });
      expect(r.error ?? null).toBeNull();
      const pos = await client.instance.computer(browserId, { action: 'get_cursor_position' });
      expect(pos.output).toBe('X=10,Y=20');
      expect(pos.base64_image).toBeTruthy();
    },
    bad: async () => {
      // @ts-expect-error: not an action
      await pre(client.instance.computer(browserId, { action: 'fly' }));
      await raw422(`/v1/instance/${browserId}/computer`, { body: { action: 'click_mouse' } });
    },
  },
  bash: {
    ok: async () => {
      const r = await client.instance.bash(ubuntuId, { command: 'echo hi; echo oops >&2' });
      expect(r.output).toContain('hi');
      expect(r.error).toContain('oops');
    },
    bad: async () => {
      // @ts-expect-error: wrong type
      await pre(client.instance.bash(ubuntuId, { command: 5 }));
      await raw422(`/v1/instance/${ubuntuId}/bash`, { body: { session: 'one' } });
      await expect(client.instance.bash(browserId, { command: 'ls' })).rejects.toBeInstanceOf(
        BadRequestError,
      );
    },
  },
  edit: {
    ok: async () => {
      const r = await client.instance.edit(ubuntuId, {
        command: 'create',
        path: 'contract.txt',
        file_text: 'one\ntwo\n',
      });
      expect(r.output).toContain('File created successfully');
    },
    bad: async () => {
      // @ts-expect-error: not a command
      await pre(client.instance.edit(ubuntuId, { command: 'explode', path: 'x' }));
      await raw422(`/v1/instance/${ubuntuId}/edit`, { body: { command: 'view' } });
    },
  },
  file: {
    ok: async () => {
      const r = await client.instance.file(ubuntuId, { command: 'read', path: 'contract.txt' });
      expect(r.output).toBe('one\ntwo\n');
      const unknown = await client.instance.file(ubuntuId, { command: 'explode' });
      expect(unknown.error).toContain('grep');
    },
    bad: async () => {
      // @ts-expect-error: missing command
      await pre(client.instance.file(ubuntuId, { path: 'x' }));
      await raw422(`/v1/instance/${ubuntuId}/file`, {
        body: { command: 'read', recursive: 'yes' },
      });
    },
  },
  upload: {
    ok: async () => {
      const r = await client.instance.upload(ubuntuId, {
        file: Buffer.from('uploaded bytes'),
        path: 'up/load.txt',
      });
      expect(r.filename).toBe('load.txt');
      const back = await client.instance.file(ubuntuId, { command: 'read', path: 'up/load.txt' });
      expect(back.output).toBe('uploaded bytes');
    },
    bad: async () => {
      // @ts-expect-error: path is required
      await pre(client.instance.upload(ubuntuId, { file: Buffer.from('x') }));
      const form = new FormData();
      form.append('file', new Blob(['x']), 'x.txt');
      const res = await fetch(`${server.url}/v1/instance/${ubuntuId}/upload`, {
        method: 'POST',
        headers: { 'x-api-key': server.apiKey },
        body: form,
      });
      expect(res.status).toBe(422);
      expect(await res.json()).toEqual({
        detail: [{ loc: ['body', 'path'], msg: 'Field required', type: 'missing' }],
      });
    },
  },
  browserStart: {
    ok: async () => {
      const { cdp_url } = await client.browser.start(browserId);
      expect(cdp_url).toMatch(
        new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/cdp/${browserId}/devtools/browser/`),
      );
    },
    bad: async () => {
      await expect(client.browser.start('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  browserCdpUrl: {
    ok: async () => expect((await client.browser.cdpUrl(browserId)).cdp_url).toMatch(/token=/),
    bad: async () => {
      await expect(client.browser.cdpUrl('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  browserCurrentUrl: {
    ok: async () =>
      expect(typeof (await client.browser.currentUrl(browserId)).current_url).toBe('string'),
    bad: async () => {
      await expect(client.browser.currentUrl('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  saveAuth: {
    ok: async () => {
      const r = await client.browser.saveAuth(browserId, { name: 'contract' });
      expect(r).toMatchObject({ status: 'success', name: 'contract' });
      authStateId = r.auth_state_id;
      expect((await client.authStates.list()).map((s) => s.id)).toContain(authStateId);
    },
    bad: async () => {
      // @ts-expect-error: wrong type
      await pre(client.browser.saveAuth(browserId, { name: 3 }));
      await expect(client.browser.saveAuth('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  modifyAuth: {
    ok: async () => {
      const r = await client.browser.modifyAuth(browserId, {
        auth_state_id: authStateId,
        name: 'renamed',
      });
      expect(r).toMatchObject({ auth_state_id: authStateId, name: 'renamed' });
    },
    bad: async () => {
      // @ts-expect-error: auth_state_id is required
      await pre(client.browser.modifyAuth(browserId, {}));
      await raw422(`/v1/instance/${browserId}/browser/modify_auth`, {});
      await expect(
        client.browser.modifyAuth(browserId, { auth_state_id: 'auth_0000000000000000' }),
      ).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  authenticate: {
    ok: async () => {
      const r = await client.browser.authenticate(browserId, { auth_state_id: authStateId });
      expect(r.status).toBe('success');
    },
    bad: async () => {
      await raw422(`/v1/instance/${browserId}/browser/authenticate`, { query: '?auth_state_id=' });
      await expect(
        client.browser.authenticate(browserId, { auth_state_id: 'auth_0000000000000000' }),
      ).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  browserStop: {
    ok: async () => {
      await client.browser.start(ubuntuId);
      expect((await client.browser.stop(ubuntuId)).status).toBe('success');
    },
    bad: async () => {
      await expect(client.browser.stop('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  codeExecute: {
    ok: async () => {
      const r = await client.code.execute(ubuntuId, { code: 'x = 20\nprint(x + 1)' });
      expect(r).toMatchObject({ status: 'ok', stdout: '21\n', error: null });
    },
    bad: async () => {
      // @ts-expect-error: code is required
      await pre(client.code.execute(ubuntuId, {}));
      await raw422(`/v1/instance/${ubuntuId}/code/execute`, {
        body: { code: 'x', timeout: 'soon' },
      });
      await expect(client.code.execute(browserId, { code: '1' })).rejects.toBeInstanceOf(
        BadRequestError,
      );
    },
  },
  listKernels: {
    ok: async () => {
      const kernels = await client.notebooks.kernels(ubuntuId);
      expect(kernels).toContainEqual(
        expect.objectContaining({ name: 'python3', language: 'python' }),
      );
    },
    bad: async () => {
      await expect(client.notebooks.kernels(browserId)).rejects.toBeInstanceOf(BadRequestError);
    },
  },
  notebookCreate: {
    ok: async () => {
      const nb = await client.notebooks.create(ubuntuId, { name: 'contract' });
      expect(nb).toMatchObject({ name: 'contract', kernel_name: 'python3', cells: [] });
      notebookId = nb.id;
    },
    bad: async () => {
      // @ts-expect-error: name is required
      await pre(client.notebooks.create(ubuntuId, {}));
      await raw422(`/v1/instance/${ubuntuId}/notebook/create`, { body: { name: 7 } });
    },
  },
  notebookAddCell: {
    ok: async () => {
      const cell = await client.notebooks.addCell(ubuntuId, notebookId, {
        type: 'code',
        content: 'print(6 * 7)',
      });
      expect(cell).toMatchObject({ type: 'code', content: 'print(6 * 7)' });
      cellId = cell.id;
    },
    bad: async () => {
      // @ts-expect-error: not a cell type
      await pre(client.notebooks.addCell(ubuntuId, notebookId, { type: 'sql', content: '' }));
      await raw422(`/v1/instance/${ubuntuId}/notebook/${notebookId}/cell`, {
        body: { type: 'code' },
      });
    },
  },
  notebookGet: {
    ok: async () => {
      const nb = await client.notebooks.get(ubuntuId, notebookId);
      expect(nb.cells.map((c) => c.id)).toEqual([cellId]);
    },
    bad: async () => {
      await expect(client.notebooks.get(ubuntuId, 'nb_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
    },
  },
  notebookExecuteCell: {
    ok: async () => {
      const cell = await client.notebooks.executeCell(ubuntuId, notebookId, cellId);
      expect(cell.execution_count).toBe(1);
      expect(JSON.stringify(cell.outputs)).toContain('42');
    },
    bad: async () => {
      await expect(
        client.notebooks.executeCell(ubuntuId, notebookId, 'cell_missing'),
      ).rejects.toBeInstanceOf(NotFoundError);
      await raw422(`/v1/instance/${ubuntuId}/notebook/${notebookId}/cell/${cellId}/execute`, {
        body: { timeout: -1 },
      });
    },
  },
  notebookExecute: {
    ok: async () => {
      const cells = await client.notebooks.execute(ubuntuId, notebookId);
      expect(cells).toHaveLength(1);
      expect(cells[0]!.execution_count).toBe(2);
    },
    bad: async () => {
      await pre(client.notebooks.execute(ubuntuId, notebookId, { timeout: 0.5 }));
      await raw422(`/v1/instance/${ubuntuId}/notebook/${notebookId}/execute`, {
        body: { timeout: 'x' },
      });
    },
  },
  notebookDelete: {
    ok: async () => {
      await client.notebooks.delete(ubuntuId, notebookId);
      await expect(client.notebooks.get(ubuntuId, notebookId)).rejects.toBeInstanceOf(
        NotFoundError,
      );
    },
    bad: async () => {
      await expect(client.notebooks.delete(ubuntuId, 'nb_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
    },
  },
  envSet: {
    ok: async () => {
      const r = await client.env.set(ubuntuId, {
        variables: { CONTRACT_A: '1', CONTRACT_B: 'two' },
      });
      expect(r.status).toBe('success');
    },
    bad: async () => {
      // @ts-expect-error: values must be strings
      await pre(client.env.set(ubuntuId, { variables: { A: 1 } }));
      await raw422(`/v1/instance/${ubuntuId}/env`, { body: { variables: { 'BAD NAME': 'x' } } });
    },
  },
  envGet: {
    ok: async () => {
      const { variables } = await client.env.get(ubuntuId);
      expect(variables).toMatchObject({ CONTRACT_A: '1', CONTRACT_B: 'two' });
    },
    bad: async () => {
      await expect(client.env.get(browserId)).rejects.toBeInstanceOf(BadRequestError);
    },
  },
  envDelete: {
    ok: async () => {
      await client.env.delete(ubuntuId, { keys: ['CONTRACT_A'] });
      const { variables } = await client.env.get(ubuntuId);
      expect(variables.CONTRACT_A).toBeUndefined();
      expect(variables.CONTRACT_B).toBe('two');
    },
    bad: async () => {
      // @ts-expect-error: keys is required
      await pre(client.env.delete(ubuntuId, {}));
      await raw422(`/v1/instance/${ubuntuId}/env/delete`, { body: { keys: 'CONTRACT_B' } });
    },
  },
  // burrow extensions: downloads and recordings (src/api/artifacts.ts), while the instances run
  listDownloads: {
    ok: async () => {
      // a page downloads a data: URL through a link with a `download` attribute
      const { cdp_url } = await client.browser.cdpUrl(browserId);
      const browser = await chromium.connectOverCDP(cdp_url);
      try {
        const page = browser.contexts()[0]!.pages()[0]!;
        await page.setContent(
          '<a id="d" download="contract.txt" href="data:text/plain,contract%20bytes">d</a>',
        );
        await Promise.all([page.waitForEvent('download'), page.click('#d')]);
      } finally {
        await browser.close();
      }
      let list: Awaited<ReturnType<typeof client.downloads.list>> = [];
      for (let i = 0; i < 50 && list[0]?.state !== 'completed'; i++) {
        list = await client.downloads.list(browserId);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(list).toEqual([expect.objectContaining({ filename: 'contract.txt', size: 14 })]);
      downloadId = list[0]!.id;
    },
    bad: async () => {
      await expect(client.downloads.list('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.downloads.list(''));
    },
  },
  getDownload: {
    ok: async () => {
      const res = await client.downloads.get(browserId, downloadId);
      expect(res.headers['content-disposition']).toContain('contract.txt');
      expect(await new Response(Readable.toWeb(res.body) as ReadableStream).text()).toBe(
        'contract bytes',
      );
    },
    bad: async () => {
      await expect(client.downloads.get(browserId, 'nope')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.downloads.get(browserId, ''));
    },
  },
  recordingStart: {
    ok: async () => {
      const { recording_id } = await client.recordings.start(browserId);
      expect(recording_id).toMatch(/^rec_/);
      recordingId = recording_id;
      await new Promise((r) => setTimeout(r, 1000));
    },
    bad: async () => {
      await expect(client.recordings.start('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.recordings.start(''));
    },
  },
  recordingStop: {
    ok: async () => {
      const clip = await client.recordings.stop(browserId);
      expect(clip).toMatchObject({ id: recordingId, state: 'completed', mime_type: 'video/mp4' });
      expect(clip.size).toBeGreaterThan(0);
    },
    bad: async () => {
      // nothing runs any more: a clear 409
      const err = await client.recordings.stop(browserId).catch((e: unknown) => e);
      expect((err as { status?: number }).status).toBe(409);
    },
  },
  listRecordings: {
    ok: async () => {
      const list = await client.recordings.list(browserId);
      expect(list.map((r) => r.id)).toEqual([recordingId]);
    },
    bad: async () => {
      await expect(client.recordings.list('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  getRecording: {
    ok: async () => {
      const res = await client.recordings.get(browserId, recordingId);
      expect(res.headers['content-type']).toBe('video/mp4');
      const head = Buffer.from(
        await new Response(Readable.toWeb(res.body) as ReadableStream).arrayBuffer(),
      );
      expect(head.subarray(4, 8).toString()).toBe('ftyp');
    },
    bad: async () => {
      await expect(client.recordings.get(browserId, 'rec_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
    },
  },
  // burrow extensions: hand-off to a person, and session time (src/api/session-time.ts)
  handoffCreate: {
    ok: async () => {
      const h = await client.instances.handoff(browserId, {
        message: 'contract',
        timeout_seconds: 60,
      });
      expect(h).toMatchObject({ instance_id: browserId, status: 'pending', message: 'contract' });
      expect(h.url).toContain(`/stream/${browserId}/`);
      handoffId = h.handoff_id;
    },
    bad: async () => {
      await pre(client.instances.handoff(browserId, { message: '' }));
      await raw422(`/v1/instance/${browserId}/handoff`, {
        body: { message: 'x', timeout_seconds: 0 },
      });
      await expect(
        client.instances.handoff('inst_missing', { message: 'x' }),
      ).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  handoffGet: {
    ok: async () => {
      const h = await client.instances.handoffStatus(browserId, handoffId, { wait_seconds: 0 });
      expect(h).toMatchObject({ handoff_id: handoffId, status: 'pending' });
      expect(h.url).toBeUndefined();
    },
    bad: async () => {
      await expect(client.instances.handoffStatus(browserId, 'ho_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
      await pre(client.instances.handoffStatus(browserId, handoffId, { wait_seconds: 61 }));
      await raw422(`/v1/instance/${browserId}/handoff/${handoffId}`, {
        method: 'GET',
        query: '?wait_seconds=abc',
      });
    },
  },
  extend: {
    ok: async () => {
      const before = Date.parse((await client.instances.get(browserId)).expires_at!);
      const inst = await client.instances.extend(browserId, { timeout_hours: 3 });
      expect(Date.parse(inst.expires_at!)).toBeGreaterThan(before);
      expect(inst.time_left_seconds).toBeGreaterThan(3 * 3600 - 60);
    },
    bad: async () => {
      await pre(client.instances.extend(browserId, { timeout_hours: 25 }));
      const detail = await raw422(`/v1/instance/${browserId}/extend`, {
        body: { timeout_hours: 48 },
      });
      expect(JSON.stringify(detail)).toContain('24');
      await expect(
        client.instances.extend('inst_missing', { timeout_hours: 1 }),
      ).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  pause: {
    ok: async () => {
      expect((await client.instances.pause(browserId)).status).toBe('paused');
      await expect(client.instance.screenshot(browserId)).rejects.toBeInstanceOf(BadRequestError);
    },
    bad: async () => {
      await expect(client.instances.pause('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },
  resume: {
    ok: async () => {
      const inst = await client.instances.resume(browserId, { timeout_hours: 0.5 });
      expect(inst.status).toBe('running');
    },
    bad: async () => {
      await pre(client.instances.resume(browserId, { timeout_hours: 0 }));
      await raw422(`/v1/instance/${browserId}/resume`, { query: '?timeout_hours=100' });
    },
  },
  stop: {
    ok: async () => {
      expect((await client.instances.stop(browserId)).status).toBe('terminated');
      expect((await client.instances.stop(ubuntuId)).status).toBe('terminated');
      expect((await client.instances.get(ubuntuId)).status).toBe('terminated');
    },
    bad: async () => {
      await expect(client.instances.stop('inst_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },

  // burrow extensions: auth states in Playwright's format (src/api/auth-states.ts)
  authStateStorageState: {
    ok: async () => {
      const state = await client.authStates.storageState(authStateId);
      expect(Array.isArray(state.cookies) && Array.isArray(state.origins)).toBe(true);
    },
    bad: async () => {
      await expect(client.authStates.storageState('auth_missing')).rejects.toBeInstanceOf(
        NotFoundError,
      );
      await pre(client.authStates.storageState(''));
    },
  },
  authStateImport: {
    ok: async () => {
      const cookies = [{ name: 'c', value: '1', domain: '127.0.0.1', path: '/' }];
      const r = await client.authStates.import({ cookies, origins: [] }, { name: 'contract' });
      expect(r).toEqual({ auth_state_id: expect.any(String), name: 'contract' });
    },
    bad: async () => {
      await pre(client.authStates.import({ cookies: 'no' } as never));
      await raw422('/v1/auth_states/import', { body: { cookies: [{}], origins: [] } });
    },
  },
  authStateDelete: {
    ok: async () => {
      const { auth_state_id } = await client.authStates.import({ cookies: [], origins: [] });
      expect(await client.authStates.delete(auth_state_id)).toEqual({ status: 'success' });
    },
    bad: async () => {
      await expect(client.authStates.delete('auth_missing')).rejects.toBeInstanceOf(NotFoundError);
    },
  },

  // burrow extensions: browser extensions (test/integration/browser/browser-extensions.test.ts loads them)
  extensionUpload: {
    ok: async () => {
      const info = await client.extensions.upload(makeZip(testExtension()));
      expect(info.id).toMatch(/^ext_[0-9a-f]{16}$/);
      expect(info).toMatchObject({ name: 'burrow test extension', filename: 'extension.zip' });
      extensionId = info.id;
    },
    bad: async () => {
      // @ts-expect-error: not a file source
      await pre(client.extensions.upload(42));
      await raw422('/v1/extensions', { body: {} }); // JSON, not multipart: no file
    },
  },
  extensionList: {
    ok: async () => {
      expect((await client.extensions.list()).map((e) => e.id)).toContain(extensionId);
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.extensions.list()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
  extensionDelete: {
    ok: async () => {
      expect(await client.extensions.delete(extensionId)).toEqual({ status: 'success' });
    },
    bad: async () => {
      await expect(client.extensions.delete(extensionId)).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.extensions.delete(''));
    },
  },

  // burrow extensions: persistent profiles (test/integration/browser/browser-profiles.test.ts uses them)
  profileList: {
    ok: async () => {
      const inst = await client.instances.start({
        instance_type: 'browser',
        profile: { name: 'contract', save_changes: true },
      });
      expect((await client.profiles.list()).find((p) => p.name === 'contract')).toBeUndefined();
      await client.instances.stop(inst.id);
      await expect
        .poll(async () => (await client.profiles.list()).find((p) => p.name === 'contract'), {
          timeout: 60_000,
        })
        .toMatchObject({ name: 'contract', in_use_by: null });
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.profiles.list()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
  profileDelete: {
    ok: async () => {
      expect(await client.profiles.delete('contract')).toEqual({ status: 'success' });
    },
    bad: async () => {
      await expect(client.profiles.delete('contract')).rejects.toBeInstanceOf(NotFoundError);
      await pre(client.profiles.delete('../up'));
    },
  },

  // burrow extensions: keys of projects need cluster mode (test/integration/cluster/cluster-keys.test.ts);
  // a single server says so, and still checks what it is sent
  keyCreate: {
    ok: async () => {
      await expect(client.keys.create({ project: 'contract' })).rejects.toMatchObject({
        status: 501,
      });
    },
    bad: async () => {
      await pre(client.keys.create({ project: '../up' }));
      await raw422('/v1/keys', { body: { project: '' } });
    },
  },
  keyList: {
    ok: async () => {
      await expect(client.keys.list()).rejects.toMatchObject({ status: 501 });
    },
    bad: async () => {
      const res = await server.api('/v1/keys', { headers: { 'x-api-key': 'wrong' } });
      expect(res.status).toBe(401);
    },
  },
  keyRevoke: {
    ok: async () => {
      await expect(client.keys.revoke('key_0123456789abcdef')).rejects.toMatchObject({
        status: 501,
      });
    },
    bad: async () => {
      await pre(client.keys.revoke(''));
    },
  },

  // burrow extension: the node itself. A drain ends its server, so it drains a second one
  nodeDrain: {
    ok: async () => {
      const other = await testServer();
      const api = new Burrow({ baseUrl: other.url, apiKey: other.apiKey, maxRetries: 0 });
      try {
        const first = await api.node.drain();
        expect(first.draining).toBe(true);
        expect(Date.parse(first.deadline)).toBeGreaterThan(Date.now());
        // nothing runs there: it closes at once
        await other.drained;
      } finally {
        await api.close();
        await other.close();
      }
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.node.drain()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },

  // burrow extensions
  version: {
    ok: async () => {
      const v = await client.meta.version();
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
      expect(v.burrow).toBe((pkg as { version: string }).version);
      expect(v.api).toBe('1.0.0');
      // what the binary itself says, asked here separately
      const said = execFileSync('/usr/lib/chromium/chromium', ['--version'], { encoding: 'utf8' });
      expect(v.chromium).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      expect(said).toContain(v.chromium!);
    },
    bad: async () => {
      const anon = new Burrow({ baseUrl: server.url, apiKey: 'wrong-key-000', maxRetries: 0 });
      await expect(anon.meta.version()).rejects.toBeInstanceOf(AuthenticationError);
      await anon.close();
    },
  },
};

describe('operation table coverage', () => {
  it('every operation has a case here, a client method and a server route', async () => {
    expect(Object.keys(cases).sort()).toEqual([...operationIds].sort());
    for (const id of operationIds) {
      const [group, method] = operations[id].client;
      const g = (client as unknown as Record<string, Record<string, unknown>>)[group];
      expect(typeof g?.[method], `${group}.${method}`).toBe('function');
      // drained on a server of its own (its case): this one must go on serving
      if (id === 'nodeDrain') continue;
      // A registered route answers for an unknown instance; an unregistered one says "Not Found".
      const path = operations[id].path.replace(/\{\w+\}/g, 'zz_unknown');
      const res = await server.api(path, { method: operations[id].method });
      const body = (await res.json()) as { detail: unknown };
      expect(body.detail, `${operations[id].method} ${operations[id].path}`).not.toBe('Not Found');
    }
  });
});

describe('every operation through the client', () => {
  for (const id of Object.keys(cases) as OperationId[]) {
    it(`${id}: success`, () => cases[id].ok());
    it(`${id}: invalid input`, () => cases[id].bad());
  }
});
