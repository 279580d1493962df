/**
 * burrow's own operations (`extension: true`), beside the 32 of docs/spec/API.md: the service's
 * version, auth states in Playwright's format, extensions, profiles, project keys, a node's drain,
 * downloads, recordings, hand-offs and a session's extension. Rows of the table in
 * ./operations.ts, which joins them after the spec's.
 */
import { z } from 'zod';
import * as art from './artifacts.js';
import * as auth from './auth-states.js';
import * as ext from './extensions.js';
import * as keys from './keys.js';
import * as node from './node.js';
import { VersionResult } from './meta.js';
import { inst, none, type OperationSpec } from './operation-spec.js';
import * as s from './schemas.js';
import * as st from './session-time.js';

export const extensionOperations = {
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
