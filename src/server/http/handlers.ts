/**
 * One handler per operation of the table. Each receives the validated path, query and body and
 * returns the response body; the app turns thrown HttpErrors into `{"detail": ...}`.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { asAnswer } from '../../internal/encoded-json.js';
import type { z } from 'zod';
import {
  DEFAULT_HANDOFF_SECONDS,
  type JsonOperationId,
  type OperationId,
  type Operations,
} from '../../api/index.js';
import type { AuthStore } from '../auth-states/store.js';
import type { ExtensionStore } from '../extensions/store.js';
import type { ProfileStore } from '../profiles/store.js';
import { extensionUploadHandler, type ExtensionUploadHandler } from './extension-routes.js';
import { keyHandlers, running } from './key-handlers.js';
import type { ProjectKeys } from '../cluster/keys.js';
import { artifactHandlers } from './artifact-routes.js';
import { fromStorageState, toStorageState } from '../auth-states/storage-state.js';
import { isToolFailure } from '../computer/failure.js';
import { serverError } from '../errors.js';
import { versionInfo } from '../meta.js';
import { DEFAULT_STORE_CAPS } from '../config-schema.js';
import { holdStart, planStart } from '../instances/plan.js';
import type { Registry } from '../instances/registry.js';
import type { CapabilityName } from '../instances/runtime.js';
import { uploadHandler, type UploadHandler } from './upload.js';

type Out<T> = T extends z.ZodType ? z.output<T> : undefined;

export interface HandlerInput<Op extends OperationId> {
  params: Out<Operations[Op] extends { params: infer P } ? P : undefined>;
  query: Out<Operations[Op] extends { query: infer Q } ? Q : undefined>;
  body: Out<Operations[Op] extends { body: infer B } ? B : undefined>;
}

export type Handler<Op extends OperationId> = (
  input: HandlerInput<Op>,
) => Promise<z.input<Operations[Op]['response']>>;

/** Rows whose multipart body the handler reads itself. */
export type MultipartOperationId = 'upload' | 'extensionUpload';

/**
 * Every JSON row; `upload` (upload.ts) and `extensionUpload` (extension-routes.ts) read their
 * multipart bodies themselves.
 */
export type Handlers = { [Op in Exclude<JsonOperationId, MultipartOperationId>]: Handler<Op> } & {
  upload: UploadHandler;
  extensionUpload: ExtensionUploadHandler;
};

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

export interface HandlerOptions {
  /** The Chromium binary of browser instances, for `version`; absent, it is reported as null. */
  chromiumPath?: string | undefined;
  /** Uploaded browser extensions (extensions/store.ts); absent, their routes answer 404. */
  extensions?: ExtensionStore | undefined;
  /** Persistent browser profiles (profiles/store.ts); absent, their routes answer 404. */
  profiles?: ProfileStore | undefined;
  /** One auth state as captured from a browser, in bytes of its JSON; past it 413. Default 8 MiB. */
  maxAuthStateBytes?: number | undefined;
  /** Where a profile that could not be saved is reported. */
  log?: { warn(obj: object, msg: string): void } | undefined;
  /** Cluster mode: API keys of projects (key-handlers.ts); absent, their routes answer 501. */
  keys?: ProjectKeys | undefined;
  /**
   * `POST /v1/node/drain` (../cluster/drain.ts): begins the drain and says when the remaining
   * instances will be stopped; absent, the route answers 404.
   */
  drain?: (() => Date) | undefined;
}

export function createHandlers(
  registry: Registry,
  auth: AuthStore,
  opts: HandlerOptions = {},
): Handlers {
  const cap = <K extends CapabilityName>(id: string, key: K, what: string) =>
    registry.capability(id, key, what);
  const browser = (id: string) => cap(id, 'browser', 'The browser');
  const notebooks = (id: string) => cap(id, 'kernels', 'Notebooks').notebooks;
  const env = (id: string) => cap(id, 'env', 'Environment');
  const log = opts.log ?? { warn: () => {} };
  const maxStateBytes = opts.maxAuthStateBytes ?? DEFAULT_STORE_CAPS.authStates.stateBytes;
  const profileStore = () => {
    if (!opts.profiles) throw serverError('not_found');
    return opts.profiles;
  };
  /** The project whose profiles a request names: its key's, or null for the admin's own. */
  const projectOf = () => {
    const who = running.getStore();
    return who && !who.admin ? who.project : null;
  };
  const extensionStore = () => {
    if (!opts.extensions) throw serverError('not_found');
    return opts.extensions;
  };
  return {
    // burrow extension: downloads and recordings (artifact-routes.ts)
    ...artifactHandlers(registry),
    // burrow extension: API keys of projects, cluster mode (key-handlers.ts)
    ...keyHandlers(opts.keys),
    // burrow extension: the node itself (a project's key is refused it: cluster/keys.ts)
    nodeDrain: async () => {
      if (!opts.drain) throw serverError('not_found');
      return { draining: true as const, deadline: opts.drain().toISOString() };
    },
    start: async ({ body }) => {
      // defaults, identity, the browser-only options and the warm pool's say: once (plan.ts)
      const plan = planStart(body);
      // its extensions resolved (an unknown id is a 404), then its profile held (a second start
      // naming it is a 409) until the instance has stopped and saved it, or this start failed
      const held = await holdStart(plan, {
        extensions: async (ids) =>
          (await extensionStore().resolve(ids)).map((e) => ({ id: e.id, dir: e.dir })),
        profile: (name, saveChanges) => profileStore().open(projectOf(), name, saveChanges, log),
      });
      try {
        const started = await registry.start(plan, held);
        await registry.flushed(); // its row is where every node lists it
        return registry.view(started);
      } catch (err) {
        held.release();
        throw err;
      }
    },
    getInstance: async ({ params }) => registry.row(params.instance_id),
    listInstances: async () => registry.rows(),
    stop: async ({ params }) => {
      const { status } = await registry.stop(params.instance_id);
      await registry.flushed();
      return { status };
    },
    pause: async ({ params }) => ({ status: (await registry.pause(params.instance_id)).status }),
    resume: async ({ params, query }) =>
      registry.view(await registry.resume(params.instance_id, query.timeout_hours)),

    screenshot: async ({ params }) => {
      const device = cap(params.instance_id, 'computer', 'screenshot');
      // this route has no `error` field: a tool failure (the display gone) is a 409 naming it
      const png = await device.screenshot().catch((err: unknown) => {
        if (!isToolFailure(err)) throw err;
        throw serverError('screenshot_failed', { reason: err.message });
      });
      // encoding and sending it (a few MB) in a turn of the event loop of their own, not in the
      // one that made the image
      await nextTurn();
      return { base64_image: png.toString('base64') };
    },
    computer: async ({ params, body }) => cap(params.instance_id, 'computer', 'computer').run(body),
    streamUrl: async ({ params }) => ({
      stream_url: await cap(params.instance_id, 'liveView', 'The live view').url(),
    }),
    bash: async ({ params, body }) => cap(params.instance_id, 'tools', 'bash').bash(body),
    edit: async ({ params, body }) => cap(params.instance_id, 'tools', 'edit').edit(body),
    file: async ({ params, body }) => cap(params.instance_id, 'tools', 'file').file(body),
    upload: uploadHandler(registry),

    browserStart: async ({ params }) => ({ cdp_url: await browser(params.instance_id).start() }),
    browserCdpUrl: async ({ params }) => ({ cdp_url: browser(params.instance_id).cdpUrl() }),
    browserCurrentUrl: async ({ params }) => ({
      current_url: await browser(params.instance_id).currentUrl(),
    }),
    browserStop: async ({ params }) => {
      await browser(params.instance_id).stop();
      return { status: 'success' };
    },

    listAuthStates: async () => {
      await auth.sync();
      return auth.list();
    },
    saveAuth: async ({ params, query }) => {
      const saved = await auth.save(
        query.name,
        await browser(params.instance_id).captureAuth(maxStateBytes),
      );
      return { status: 'success', auth_state_id: saved.id, name: saved.name };
    },
    modifyAuth: async ({ params, query }) => {
      const b = browser(params.instance_id);
      await auth.fetch(query.auth_state_id); // 404 before touching the browser
      const saved = await auth.overwrite(
        query.auth_state_id,
        await b.captureAuth(maxStateBytes),
        query.name,
      );
      return { status: 'success', auth_state_id: saved.id, name: saved.name };
    },
    authenticate: async ({ params, query }) => {
      const b = browser(params.instance_id);
      await b.applyAuth((await auth.fetch(query.auth_state_id)).data);
      return { status: 'success' };
    },
    // burrow extensions: auth states in Playwright's format (storage-state.ts), and delete
    authStateStorageState: async ({ params }) =>
      toStorageState((await auth.fetch(params.auth_state_id)).data),
    authStateImport: async ({ query, body }) => {
      const saved = await auth.upsert(query.name, fromStorageState(body));
      return { auth_state_id: saved.id, name: saved.name };
    },
    authStateDelete: async ({ params }) => {
      await auth.delete(params.auth_state_id);
      return { status: 'success' };
    },

    codeExecute: async ({ params, body }) =>
      asAnswer(
        cap(params.instance_id, 'kernels', 'Code execution').execute(
          body.code,
          body.kernel_name,
          body.timeout,
        ),
      ),
    listKernels: async ({ params }) => notebooks(params.instance_id).kernels(),
    notebookCreate: async ({ params, body }) =>
      notebooks(params.instance_id).create(body.name, body.kernel_name),
    notebookGet: async ({ params }) =>
      asAnswer(notebooks(params.instance_id).get(params.notebook_id)),
    notebookDelete: async ({ params }) => notebooks(params.instance_id).delete(params.notebook_id),
    notebookAddCell: async ({ params, body }) =>
      asAnswer(notebooks(params.instance_id).addCell(params.notebook_id, body)),
    notebookExecuteCell: async ({ params, body }) =>
      asAnswer(notebooks(params.instance_id).executeCell(params.notebook_id, params.cell_id, body)),
    notebookExecute: async ({ params, body }) =>
      asAnswer(notebooks(params.instance_id).execute(params.notebook_id, body)),

    envGet: async ({ params }) => ({ variables: await env(params.instance_id).get() }),
    envSet: async ({ params, body }) => {
      await env(params.instance_id).set(body.variables);
      const n = Object.keys(body.variables).length;
      return { status: 'success', message: `Set ${plural(n, 'variable')}` };
    },
    envDelete: async ({ params, body }) => {
      await env(params.instance_id).delete(body.keys);
      return { status: 'success', message: `Deleted ${plural(body.keys.length, 'variable')}` };
    },

    version: async () => versionInfo(opts.chromiumPath),

    // burrow extensions: hand-off to a person, and session time (instances/handoffs.ts)
    handoffCreate: async ({ params, body }) => {
      const id = params.instance_id;
      const liveView = cap(id, 'liveView', 'Hand-off');
      const base = new URL(await liveView.url());
      const h = registry.handoffs.create(
        id,
        body.message,
        body.timeout_seconds ?? DEFAULT_HANDOFF_SECONDS,
      );
      // the page of the live view, opened with the hand-off's own token instead of the instance's
      base.searchParams.set('token', h.token);
      base.searchParams.set('handoff', h.id);
      return { ...h.toJSON(), url: base.href };
    },
    handoffGet: async ({ params, query }) => {
      registry.get(params.instance_id); // 404 for an unknown instance first
      const h = await registry.handoffs.wait(
        params.instance_id,
        params.handoff_id,
        query.wait_seconds,
      );
      return h.toJSON();
    },
    extend: async ({ params, body }) => {
      registry.extend(params.instance_id, body.timeout_hours);
      return registry.row(params.instance_id);
    },
    // burrow extensions: browser extensions (extension-routes.ts, extensions/store.ts)
    extensionUpload: (input) => extensionUploadHandler(extensionStore())(input),
    extensionList: async () => extensionStore().list(),
    extensionDelete: async ({ params }) => {
      await extensionStore().delete(params.extension_id);
      return { status: 'success' };
    },
    // burrow extensions: persistent browser profiles (profiles/store.ts)
    profileList: async () => {
      // the admin's list shows every project's; a project's key, its own
      const who = running.getStore();
      return profileStore().list(who && !who.admin ? who.project : undefined);
    },
    profileDelete: async ({ params }) => {
      await profileStore().delete(projectOf(), params.profile_name);
      return { status: 'success' };
    },
  };
}
