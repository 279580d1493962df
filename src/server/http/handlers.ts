/**
 * One handler per operation of the table. Each receives the validated path, query and body and
 * returns the response body; the app turns thrown HttpErrors into `{"detail": ...}`.
 */
import type { z } from 'zod';
import type { JsonOperationId, OperationId, Operations } from '../../api/index.js';
import type { AuthStore } from '../auth-states/store.js';
import { artifactHandlers } from './artifact-routes.js';
import { serverError } from '../errors.js';
import { fromStorageState, toStorageState } from '../auth-states/storage-state.js';
import { versionInfo } from '../meta.js';
import type { Registry } from '../instances/registry.js';
import type { InstanceRuntime } from '../instances/runtime.js';

type Out<T> = T extends z.ZodType ? z.output<T> : undefined;

export interface HandlerInput<Op extends OperationId> {
  params: Out<Operations[Op] extends { params: infer P } ? P : undefined>;
  query: Out<Operations[Op] extends { query: infer Q } ? Q : undefined>;
  body: Out<Operations[Op] extends { body: infer B } ? B : undefined>;
}

export type Handler<Op extends OperationId> = (
  input: HandlerInput<Op>,
) => Promise<z.input<Operations[Op]['response']>>;

/** Every JSON row but `upload` (streamed in by app.ts); `stream` rows have routes of their own. */
export type Handlers = { [Op in Exclude<JsonOperationId, 'upload'>]: Handler<Op> };

/**
 * The capability `key` of a running instance (methods bound to its runtime), or the 404/400 that
 * says why not; a 400 names the instance type when the type lacks it.
 */
function method<K extends keyof InstanceRuntime>(
  registry: Registry,
  id: string,
  key: K,
  what: string,
): NonNullable<InstanceRuntime[K]> {
  const rec = registry.running(id);
  const cap = rec.runtime[key];
  if (cap === undefined) throw serverError('capability_unavailable', { what, type: rec.type });
  return (typeof cap === 'function' ? cap.bind(rec.runtime) : cap) as NonNullable<
    InstanceRuntime[K]
  >;
}

export interface HandlerOptions {
  /** The Chromium binary of browser instances, for `version`; absent, it is reported as null. */
  chromiumPath?: string | undefined;
}

export function createHandlers(
  registry: Registry,
  auth: AuthStore,
  opts: HandlerOptions = {},
): Handlers {
  const browser = (id: string) => method(registry, id, 'browser', 'The browser');
  return {
    // burrow extension: downloads and recordings (artifact-routes.ts)
    ...artifactHandlers(registry),
    start: async ({ body }) => (await registry.start(body)).toJSON(),
    getInstance: async ({ params }) => registry.get(params.instance_id).toJSON(),
    listInstances: async () => registry.list().map((r) => r.toJSON()),
    listAuthStates: async () => auth.list(),
    stop: async ({ params }) => {
      const rec = await registry.stop(params.instance_id);
      return { status: rec.status };
    },
    pause: async ({ params }) => {
      const rec = await registry.pause(params.instance_id);
      return { status: rec.status };
    },
    resume: async ({ params, query }) =>
      (await registry.resume(params.instance_id, query.timeout_hours ?? 1)).toJSON(),

    screenshot: async ({ params }) => {
      const shot = method(registry, params.instance_id, 'screenshot', 'screenshot');
      return { base64_image: (await shot()).toString('base64') };
    },
    streamUrl: async ({ params }) => {
      const url = method(registry, params.instance_id, 'streamUrl', 'The live view');
      return { stream_url: await url() };
    },
    computer: async ({ params, body }) =>
      method(registry, params.instance_id, 'computer', 'computer')(body),
    bash: async ({ params, body }) => method(registry, params.instance_id, 'bash', 'bash')(body),
    edit: async ({ params, body }) => method(registry, params.instance_id, 'edit', 'edit')(body),
    file: async ({ params, body }) => method(registry, params.instance_id, 'file', 'file')(body),

    browserStart: async ({ params }) => ({ cdp_url: await browser(params.instance_id).start() }),
    browserCdpUrl: async ({ params }) => ({ cdp_url: browser(params.instance_id).cdpUrl() }),
    browserCurrentUrl: async ({ params }) => ({
      current_url: await browser(params.instance_id).currentUrl(),
    }),
    saveAuth: async ({ params, query }) => {
      const data = await browser(params.instance_id).captureAuth();
      const saved = await auth.save(query.name, data);
      return { status: 'success', auth_state_id: saved.id, name: saved.name };
    },
    modifyAuth: async ({ params, query }) => {
      const b = browser(params.instance_id);
      auth.get(query.auth_state_id); // 404 before touching the browser
      const saved = await auth.overwrite(query.auth_state_id, await b.captureAuth(), query.name);
      return { status: 'success', auth_state_id: saved.id, name: saved.name };
    },
    authenticate: async ({ params, query }) => {
      const b = browser(params.instance_id);
      await b.applyAuth(auth.get(query.auth_state_id).data);
      return { status: 'success' };
    },
    // burrow extensions: auth states in Playwright's format (storage-state.ts), and delete
    authStateStorageState: async ({ params }) =>
      toStorageState(auth.get(params.auth_state_id).data),
    authStateImport: async ({ query, body }) => {
      const saved = await auth.upsert(query.name, fromStorageState(body));
      return { auth_state_id: saved.id, name: saved.name };
    },
    authStateDelete: async ({ params }) => {
      await auth.delete(params.auth_state_id);
      return { status: 'success' };
    },

    browserStop: async ({ params }) => {
      await browser(params.instance_id).stop();
      return { status: 'success' };
    },

    codeExecute: async ({ params, body }) =>
      method(
        registry,
        params.instance_id,
        'codeExecute',
        'Code execution',
      )(body.code, body.kernel_name ?? 'python3', body.timeout),
    listKernels: async ({ params }) =>
      method(registry, params.instance_id, 'notebooks', 'Notebooks').kernels(),
    notebookCreate: async ({ params, body }) =>
      method(registry, params.instance_id, 'notebooks', 'Notebooks').create(
        body.name,
        body.kernel_name ?? 'python3',
      ),
    notebookGet: async ({ params }) =>
      method(registry, params.instance_id, 'notebooks', 'Notebooks').get(params.notebook_id),
    notebookDelete: async ({ params }) =>
      method(registry, params.instance_id, 'notebooks', 'Notebooks').delete(params.notebook_id),
    notebookAddCell: async ({ params, body }) =>
      method(registry, params.instance_id, 'notebooks', 'Notebooks').addCell(
        params.notebook_id,
        body,
      ),
    notebookExecuteCell: async ({ params, body }) =>
      method(registry, params.instance_id, 'notebooks', 'Notebooks').executeCell(
        params.notebook_id,
        params.cell_id,
        body,
      ),
    notebookExecute: async ({ params, body }) =>
      method(registry, params.instance_id, 'notebooks', 'Notebooks').execute(
        params.notebook_id,
        body,
      ),

    envGet: async ({ params }) => ({
      variables: await method(registry, params.instance_id, 'env', 'Environment').get(),
    }),
    envSet: async ({ params, body }) => {
      const keys = Object.keys(body.variables);
      await method(registry, params.instance_id, 'env', 'Environment').set(body.variables);
      return {
        status: 'success',
        message: `Set ${keys.length} variable${keys.length === 1 ? '' : 's'}`,
      };
    },
    envDelete: async ({ params, body }) => {
      await method(registry, params.instance_id, 'env', 'Environment').delete(body.keys);
      return {
        status: 'success',
        message: `Deleted ${body.keys.length} variable${body.keys.length === 1 ? '' : 's'}`,
      };
    },

    version: async () => versionInfo(opts.chromiumPath),
  };
}
