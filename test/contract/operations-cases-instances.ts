/**
 * The contract's cases for the instances and their tools (operations.test.ts runs them): start,
 * the instance views, computer, bash, edit, file and upload, the browser and its auth, code and
 * notebooks, env. Ordered: later cases use what earlier ones made (the auth state, the notebook
 * and its cell).
 */
import { expect } from 'vitest';
import {
  AuthenticationError,
  BadRequestError,
  Burrow,
  NotFoundError,
} from '../../src/client/index.js';
import type { OperationId } from '../../src/api/index.js';
import {
  browserId,
  client,
  pre,
  raw422,
  server,
  ubuntuId,
  type Case,
} from './operations-harness.js';

/** Made by saveAuth, used by the auth state cases (operations-cases-extensions.ts too). */
export let authStateId = '';
let notebookId = '';
let cellId = '';

export const instanceCases = {
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
} satisfies Partial<Record<OperationId, Case>>;
