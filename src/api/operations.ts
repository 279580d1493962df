/**
 * The 32 operations of docs/spec/API.md and burrow's extensions (`extension: true`) as one
 * table. The client builds a method from each row and the server a route; test/contract proves
 * both sides cover every row, and src/api/openapi.ts describes every row in the served OpenAPI
 * document.
 */
import { z } from 'zod';
import { ComputerAction } from './computer.js';
import { extensionOperations } from './extension-operations.js';
import { inst, none, type OperationSpec } from './operation-spec.js';
import * as s from './schemas.js';

export type { BodyKind, HttpMethod, OperationSpec, ResponseKind } from './operation-spec.js';

/** The 32 operations of the spec, in its order. */
const specOperations = {
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
} as const satisfies Record<string, OperationSpec>;

export const operations = {
  ...specOperations,
  ...extensionOperations,
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
