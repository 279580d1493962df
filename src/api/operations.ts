/**
 * The 32 operations of docs/spec/API.md and burrow's extensions (`extension: true`) as one
 * table. The client builds a method from each row and the server a route; test/contract proves
 * both sides cover every row, and src/api/openapi.ts describes every row in the served OpenAPI
 * document.
 */
import { z } from 'zod';
import * as art from './artifacts.js';
import * as auth from './auth-states.js';
import * as ext from './extensions.js';
import * as keys from './keys.js';
import * as node from './node.js';
import { ComputerAction } from './computer.js';
import { VersionResult } from './meta.js';
import * as s from './schemas.js';
import * as st from './session-time.js';

export type HttpMethod = 'GET' | 'POST' | 'DELETE';
export type BodyKind = 'none' | 'json' | 'multipart';
/**
 * How a successful response travels: `json` (the default when a row says nothing) is a JSON body
 * checked against `response`; `stream` is raw bytes (a download, a recording) handed over as they
 * arrive, with `response` unused for the body (give it `z.unknown()`).
 */
export type ResponseKind = 'json' | 'stream';

export interface OperationSpec {
  /** Group and method name on the client, e.g. `['instances', 'start']`. */
  readonly client: readonly [group: string, method: string];
  readonly method: HttpMethod;
  /** Path template with `{name}` parameters, relative to the base URL. */
  readonly path: string;
  readonly params?: z.ZodType;
  readonly query?: z.ZodType;
  readonly body?: z.ZodType;
  readonly bodyKind: BodyKind;
  readonly response: z.ZodType;
  /**
   * Absent means `json`. The server's generic route loop (src/server/http/app.ts) skips `stream` rows:
   * their owners register the route themselves, on the same method and path. The client's
   * `Core.request` resolves a `stream` row to a `StreamResponse` (src/client/core.ts).
   */
  readonly responseKind?: ResponseKind;
  /** True for burrow's own routes, not in docs/spec/API.md. Absent means a row of the spec. */
  readonly extension?: boolean;
  /** The status of a success; absent means 200 (a drain that has begun answers 202). */
  readonly successStatus?: 200 | 202;
  /**
   * Whether repeating the request after a lost response is harmless, so the client may retry it
   * automatically. Never true for `POST /v1/start`.
   */
  readonly idempotent: boolean;
}

const none = { bodyKind: 'none' } as const;
const inst = { params: s.InstancePath } as const;

export const operations = {
  // Instances
  start: {
    client: ['instances', 'start'],
    method: 'POST',
    path: '/v1/start',
    body: s.StartRequest,
    bodyKind: 'json',
    response: s.Instance,
    idempotent: false,
  },
  getInstance: {
    client: ['instances', 'get'],
    method: 'GET',
    path: '/v1/instance/{instance_id}',
    ...inst,
    ...none,
    response: s.Instance,
    idempotent: true,
  },
  listInstances: {
    client: ['instances', 'list'],
    method: 'GET',
    path: '/v1/instances',
    ...none,
    response: z.array(s.Instance),
    idempotent: true,
  },
  listAuthStates: {
    client: ['authStates', 'list'],
    method: 'GET',
    path: '/v1/auth_states',
    ...none,
    response: z.array(s.AuthState),
    idempotent: true,
  },
  stop: {
    client: ['instances', 'stop'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/stop',
    ...inst,
    ...none,
    response: s.StatusResult,
    idempotent: true,
  },
  pause: {
    client: ['instances', 'pause'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/pause',
    ...inst,
    ...none,
    response: s.StatusResult,
    idempotent: true,
  },
  resume: {
    client: ['instances', 'resume'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/resume',
    ...inst,
    query: s.ResumeQuery,
    ...none,
    response: s.Instance,
    idempotent: true,
  },

  // Observation and control
  screenshot: {
    client: ['instance', 'screenshot'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/screenshot',
    ...inst,
    ...none,
    response: s.ScreenshotResult,
    idempotent: true,
  },
  streamUrl: {
    client: ['instance', 'streamUrl'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/stream_url',
    ...inst,
    ...none,
    response: s.StreamUrlResult,
    idempotent: true,
  },
  computer: {
    client: ['instance', 'computer'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/computer',
    ...inst,
    body: ComputerAction,
    bodyKind: 'json',
    response: s.ToolResult,
    idempotent: false,
  },
  bash: {
    client: ['instance', 'bash'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/bash',
    ...inst,
    body: s.BashRequest,
    bodyKind: 'json',
    response: s.ToolResult,
    idempotent: false,
  },
  edit: {
    client: ['instance', 'edit'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/edit',
    ...inst,
    body: s.EditRequest,
    bodyKind: 'json',
    response: s.ToolResult,
    idempotent: false,
  },
  file: {
    client: ['instance', 'file'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/file',
    ...inst,
    body: s.FileRequest,
    bodyKind: 'json',
    response: s.ToolResult,
    idempotent: false,
  },
  upload: {
    client: ['instance', 'upload'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/upload',
    ...inst,
    body: s.UploadFields,
    bodyKind: 'multipart',
    response: s.UploadResult,
    idempotent: false,
  },

  // Browser
  browserStart: {
    client: ['browser', 'start'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/browser/start',
    ...inst,
    ...none,
    response: s.BrowserStartResult,
    idempotent: true,
  },
  browserCdpUrl: {
    client: ['browser', 'cdpUrl'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/browser/cdp_url',
    ...inst,
    ...none,
    response: s.CdpUrlResult,
    idempotent: true,
  },
  browserCurrentUrl: {
    client: ['browser', 'currentUrl'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/browser/current_url',
    ...inst,
    ...none,
    response: s.CurrentUrlResult,
    idempotent: true,
  },
  saveAuth: {
    client: ['browser', 'saveAuth'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/browser/save_auth',
    ...inst,
    query: s.SaveAuthQuery,
    ...none,
    response: s.SaveAuthResult,
    idempotent: false,
  },
  modifyAuth: {
    client: ['browser', 'modifyAuth'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/browser/modify_auth',
    ...inst,
    query: s.ModifyAuthQuery,
    ...none,
    response: s.SaveAuthResult,
    idempotent: true,
  },
  authenticate: {
    client: ['browser', 'authenticate'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/browser/authenticate',
    ...inst,
    query: s.AuthenticateQuery,
    ...none,
    response: s.StatusResult,
    idempotent: true,
  },
  browserStop: {
    client: ['browser', 'stop'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/browser/stop',
    ...inst,
    ...none,
    response: s.StatusResult,
    idempotent: true,
  },

  // Code and notebooks
  codeExecute: {
    client: ['code', 'execute'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/code/execute',
    ...inst,
    body: s.CodeExecuteRequest,
    bodyKind: 'json',
    response: s.CodeExecuteResult,
    idempotent: false,
  },
  listKernels: {
    client: ['notebooks', 'kernels'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/notebook/kernels',
    ...inst,
    ...none,
    response: z.array(s.KernelInfo),
    idempotent: true,
  },
  notebookCreate: {
    client: ['notebooks', 'create'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/notebook/create',
    ...inst,
    body: s.NotebookCreateRequest,
    bodyKind: 'json',
    response: s.Notebook,
    idempotent: false,
  },
  notebookGet: {
    client: ['notebooks', 'get'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/notebook/{notebook_id}',
    params: s.NotebookPath,
    ...none,
    response: s.Notebook,
    idempotent: true,
  },
  notebookDelete: {
    client: ['notebooks', 'delete'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/notebook/{notebook_id}/delete',
    params: s.NotebookPath,
    ...none,
    response: s.NotebookDeleteResult,
    idempotent: true,
  },
  notebookAddCell: {
    client: ['notebooks', 'addCell'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/notebook/{notebook_id}/cell',
    params: s.NotebookPath,
    body: s.AddCellRequest,
    bodyKind: 'json',
    response: s.NotebookCell,
    idempotent: false,
  },
  notebookExecuteCell: {
    client: ['notebooks', 'executeCell'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/notebook/{notebook_id}/cell/{cell_id}/execute',
    params: s.CellPath,
    body: s.ExecuteCellRequest,
    bodyKind: 'json',
    response: s.NotebookCell,
    idempotent: false,
  },
  notebookExecute: {
    client: ['notebooks', 'execute'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/notebook/{notebook_id}/execute',
    params: s.NotebookPath,
    body: s.ExecuteCellRequest,
    bodyKind: 'json',
    response: z.array(s.NotebookCell),
    idempotent: false,
  },

  // Environment variables
  envGet: {
    client: ['env', 'get'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/env',
    ...inst,
    ...none,
    response: s.EnvGetResult,
    idempotent: true,
  },
  envSet: {
    client: ['env', 'set'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/env',
    ...inst,
    body: s.EnvSetRequest,
    bodyKind: 'json',
    response: s.EnvStatusResult,
    idempotent: true,
  },
  envDelete: {
    client: ['env', 'delete'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/env/delete',
    ...inst,
    body: s.EnvDeleteRequest,
    bodyKind: 'json',
    response: s.EnvStatusResult,
    idempotent: true,
  },

  // burrow extensions: the service itself (src/api/meta.ts)
  version: {
    client: ['meta', 'version'],
    method: 'GET',
    path: '/v1/version',
    ...none,
    response: VersionResult,
    idempotent: true,
    extension: true,
  },

  // burrow extensions: auth states in Playwright's storageState format, and delete
  // (src/api/auth-states.ts)
  authStateStorageState: {
    client: ['authStates', 'storageState'],
    method: 'GET',
    path: '/v1/auth_states/{auth_state_id}/storage_state',
    params: auth.AuthStatePath,
    ...none,
    response: auth.StorageState,
    idempotent: true,
    extension: true,
  },
  authStateImport: {
    client: ['authStates', 'import'],
    method: 'POST',
    path: '/v1/auth_states/import',
    query: auth.ImportAuthStateQuery,
    body: auth.StorageState,
    bodyKind: 'json',
    response: auth.ImportAuthStateResult,
    idempotent: false,
    extension: true,
  },
  authStateDelete: {
    client: ['authStates', 'delete'],
    method: 'POST',
    path: '/v1/auth_states/{auth_state_id}/delete',
    params: auth.AuthStatePath,
    ...none,
    response: auth.DeleteAuthStateResult,
    idempotent: true,
    extension: true,
  },

  // burrow extensions: browser extensions, uploaded once and named by `POST /v1/start`'s
  // `extensions` (src/api/extensions.ts)
  extensionUpload: {
    client: ['extensions', 'upload'],
    method: 'POST',
    path: '/v1/extensions',
    body: ext.ExtensionUploadFields,
    bodyKind: 'multipart',
    response: ext.ExtensionInfo,
    idempotent: false,
    extension: true,
  },
  extensionList: {
    client: ['extensions', 'list'],
    method: 'GET',
    path: '/v1/extensions',
    ...none,
    response: z.array(ext.ExtensionInfo),
    idempotent: true,
    extension: true,
  },
  extensionDelete: {
    client: ['extensions', 'delete'],
    method: 'DELETE',
    path: '/v1/extensions/{extension_id}',
    params: ext.ExtensionPath,
    ...none,
    response: ext.DeleteExtensionResult,
    idempotent: true,
    extension: true,
  },

  // burrow extensions: persistent browser profiles, named by `POST /v1/start`'s `profile`
  profileList: {
    client: ['profiles', 'list'],
    method: 'GET',
    path: '/v1/profiles',
    ...none,
    response: z.array(ext.ProfileInfo),
    idempotent: true,
    extension: true,
  },
  profileDelete: {
    client: ['profiles', 'delete'],
    method: 'DELETE',
    path: '/v1/profiles/{profile_name}',
    params: ext.ProfilePath,
    ...none,
    response: ext.DeleteExtensionResult,
    idempotent: true,
    extension: true,
  },

  // burrow extensions: API keys of projects, cluster mode, managed with the admin key
  // (src/api/keys.ts)
  keyCreate: {
    client: ['keys', 'create'],
    method: 'POST',
    path: '/v1/keys',
    body: keys.KeyCreateRequest,
    bodyKind: 'json',
    response: keys.KeyCreated,
    idempotent: false,
    extension: true,
  },
  keyList: {
    client: ['keys', 'list'],
    method: 'GET',
    path: '/v1/keys',
    ...none,
    response: z.array(keys.KeyInfo),
    idempotent: true,
    extension: true,
  },
  keyRevoke: {
    client: ['keys', 'revoke'],
    method: 'DELETE',
    path: '/v1/keys/{key_id}',
    params: keys.KeyPath,
    ...none,
    response: keys.RevokeKeyResult,
    idempotent: true,
    extension: true,
  },

  // burrow extension: the node that answers (src/api/node.ts), admin key only
  nodeDrain: {
    client: ['node', 'drain'],
    method: 'POST',
    path: '/v1/node/drain',
    ...none,
    response: node.DrainResult,
    successStatus: 202,
    // a second drain changes nothing: it answers the deadline of the first
    idempotent: true,
    extension: true,
  },

  // burrow extensions: downloads and recordings of an instance (src/api/artifacts.ts)
  listDownloads: {
    client: ['downloads', 'list'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/downloads',
    ...inst,
    ...none,
    response: z.array(art.Download),
    idempotent: true,
    extension: true,
  },
  getDownload: {
    client: ['downloads', 'get'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/downloads/{download_id}',
    params: art.DownloadPath,
    ...none,
    response: z.unknown(),
    responseKind: 'stream',
    idempotent: true,
    extension: true,
  },
  recordingStart: {
    client: ['recordings', 'start'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/recording/start',
    ...inst,
    ...none,
    response: art.RecordingStartResult,
    idempotent: false,
    extension: true,
  },
  recordingStop: {
    client: ['recordings', 'stop'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/recording/stop',
    ...inst,
    ...none,
    response: art.Recording,
    idempotent: false,
    extension: true,
  },
  listRecordings: {
    client: ['recordings', 'list'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/recordings',
    ...inst,
    ...none,
    response: z.array(art.Recording),
    idempotent: true,
    extension: true,
  },
  getRecording: {
    client: ['recordings', 'get'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/recordings/{recording_id}',
    params: art.RecordingPath,
    ...none,
    response: z.unknown(),
    responseKind: 'stream',
    idempotent: true,
    extension: true,
  },

  // burrow extensions: hand-off to a person, and session time (src/api/session-time.ts)
  handoffCreate: {
    client: ['instances', 'handoff'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/handoff',
    ...inst,
    body: st.HandoffRequest,
    bodyKind: 'json',
    response: st.Handoff,
    idempotent: false,
    extension: true,
  },
  handoffGet: {
    client: ['instances', 'handoffStatus'],
    method: 'GET',
    path: '/v1/instance/{instance_id}/handoff/{handoff_id}',
    params: st.HandoffPath,
    query: st.HandoffWaitQuery,
    ...none,
    response: st.Handoff,
    idempotent: true,
    extension: true,
  },
  extend: {
    client: ['instances', 'extend'],
    method: 'POST',
    path: '/v1/instance/{instance_id}/extend',
    ...inst,
    body: st.ExtendRequest,
    bodyKind: 'json',
    response: s.Instance,
    idempotent: true,
    extension: true,
  },
} as const satisfies Record<string, OperationSpec>;

export type Operations = typeof operations;
export type OperationId = keyof Operations;
/** The rows whose response is a byte stream rather than JSON. */
export type StreamOperationId = {
  [K in OperationId]: Operations[K] extends { readonly responseKind: 'stream' } ? K : never;
}[OperationId];
/** The rows answered with JSON: every row the server's generic loop routes. */
export type JsonOperationId = Exclude<OperationId, StreamOperationId>;
export const operationIds = Object.keys(operations) as OperationId[];
