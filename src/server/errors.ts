/**
 * The server's error catalogue (docs/architecture.md): every non-422 error the server answers is a
 * row of `SERVER_ERRORS`, with its HTTP status, a stable snake_case code and a message template. On
 * the wire an error is `{"detail": "<message>"}` (COMPAT.md decision) plus the header
 * `x-burrow-error: <code>`; the body keeps the API's shape. docs/server-errors.md lists every row
 * and a unit test keeps the two equal.
 *
 * Make an error with `serverError(code, params)`: the template's `{name}` placeholders are the
 * params, checked by the compiler. Never put the API key or a token in a param.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

interface ServerErrorRow {
  readonly status: number;
  /** The `detail`, with `{name}` placeholders filled from the params. */
  readonly message: string;
  /** Headers every answer of this row carries (besides `x-burrow-error`). */
  readonly headers?: Readonly<Record<string, string>>;
}

const CLOSE = { Connection: 'close' } as const;

export const SERVER_ERRORS = {
  // --- the request itself (HTTP parser, Fastify, body limits) ---
  unauthorized: { status: 401, message: 'Missing or invalid API key (header x-api-key)' },
  token_invalid: { status: 401, message: 'Invalid or expired {kind} token' },
  not_found: { status: 404, message: 'Not Found' },
  method_not_allowed: {
    status: 405,
    message: 'Method {method} is not allowed',
    headers: { Allow: 'GET, HEAD, POST, DELETE, OPTIONS' },
  },
  request_timeout: { status: 408, message: 'Request not received in time' },
  headers_too_large: { status: 431, message: 'Request headers too large' },
  chunk_extensions_too_large: { status: 413, message: 'Chunk extensions too large' },
  invalid_method: { status: 400, message: 'Bad request: unknown or malformed method' },
  malformed_request: { status: 400, message: 'Bad request: malformed HTTP' },
  bad_url: { status: 400, message: 'Malformed percent-encoding in the URL path' },
  uri_too_long: { status: 414, message: 'A path parameter is longer than {limit} characters' },
  unsupported_media_type: { status: 415, message: 'Unsupported Media Type' },
  request_aborted: { status: 400, message: 'Request aborted', headers: CLOSE },
  too_many_connections: {
    status: 429,
    message: 'Too many open connections from {address} (limit {limit}); close some and retry',
    headers: { 'Retry-After': '1', ...CLOSE },
  },
  body_too_large: {
    status: 413,
    message: 'Request body larger than {limit} bytes',
    headers: CLOSE,
  },
  upload_too_large: {
    status: 413,
    message:
      "Upload larger than {limit} bytes (the server's limit; BURROW_MAX_UPLOAD_BYTES raises it)",
    headers: CLOSE,
  },
  malformed_multipart: {
    status: 400,
    message: 'Malformed multipart body: {reason}',
    headers: CLOSE,
  },
  multipart_too_many_parts: {
    status: 413,
    message: 'Too many parts in the multipart body (one file and at most {fields} fields)',
    headers: CLOSE,
  },
  multipart_field_too_long: {
    status: 413,
    message: 'Multipart field longer than {limit} bytes',
    headers: CLOSE,
  },
  bad_request: { status: 400, message: '{detail}' },

  // --- instances and the server ---
  instance_not_found: { status: 404, message: 'Instance {id} not found' },
  instance_not_running: { status: 400, message: 'Instance {id} is {state}' },
  instance_not_paused: { status: 400, message: 'Instance {id} is {status}, not paused' },
  instance_not_ready: { status: 400, message: 'Instance is not running yet' },
  instance_stopping: { status: 400, message: 'Instance is stopping or stopped' },
  instance_gone: { status: 410, message: 'Instance {id} is {state}' },
  instance_not_live: { status: 404, message: 'The instance is not running' },
  instance_type_unavailable: {
    status: 400,
    message: '{type} instances are not available on this server',
  },
  capability_unavailable: { status: 400, message: '{what} is not available on {type} instances' },
  server_at_capacity: {
    status: 429,
    message:
      'Server at capacity: {live} live instances (limit {limit}); stop one or retry in {seconds} s',
  },
  isolation_unavailable: { status: 503, message: '{reason}' },
  instance_requirements_missing: { status: 503, message: '{detail}' },
  shutting_down: { status: 503, message: 'Server is shutting down' },
  instance_failed_to_start: { status: 500, message: 'Instance {id} failed to start: {reason}' },
  cluster_database_unavailable: {
    status: 503,
    message:
      "The cluster's database does not answer ({reason}); running instances go on, starts wait for it",
    headers: { 'Retry-After': '5' },
  },
  cluster_at_capacity: {
    status: 429,
    message:
      'Cluster at capacity: {live} live instances on {nodes} nodes (limit {limit}); retry in {seconds} s',
  },
  node_unreachable: {
    status: 502,
    message: 'Instance {id} lives on node {node}, which did not answer: {reason}',
  },
  // --- keys of projects (cluster/keys.ts, http/cluster/keys.ts) ---
  keys_need_cluster: {
    status: 501,
    message:
      'API keys of projects need cluster mode (serve --cluster): this server has only its own key',
  },
  admin_key_required: { status: 403, message: '{what} needs the admin key (the server’s own)' },
  key_not_found: { status: 404, message: 'API key {id} not found' },
  instance_node_lost: {
    status: 410,
    message: 'Instance {id} is gone: its node {node} was lost (end_reason node_lost)',
  },
  node_draining: {
    status: 503,
    message: 'Node {node} is draining and takes no new instances; start through another node',
    headers: { 'Retry-After': '5' },
  },

  // --- upstream proxy (start option `proxy`) ---
  proxy_refused: { status: 400, message: '{reason}' },
  proxy_unreachable: { status: 400, message: '{reason}' },
  proxy_auth_failed: { status: 400, message: '{reason}' },
  proxy_unsupported: {
    status: 400,
    message:
      'proxy needs isolated instances (the egress chains to it); this server runs unisolated',
  },

  // --- browser, CDP relay, live view ---
  browser_not_running: {
    status: 400,
    message: 'The browser is not running; call browser/start',
  },
  browser_no_tab: { status: 400, message: 'The browser has no open tab' },
  cdp_browser_not_running: { status: 404, message: 'The browser is not running' },
  cdp_path_not_found: { status: 404, message: 'Unknown DevTools path' },
  cdp_refused: { status: 502, message: 'The browser refused the DevTools connection' },
  cdp_too_many_clients: {
    status: 429,
    message: 'Too many DevTools connections to this browser (limit {limit}); close some and retry',
    headers: { 'Retry-After': '1', ...CLOSE },
  },
  upgrade_timeout: {
    status: 504,
    message: 'Instance {id} did not answer the WebSocket connection within {seconds} s',
  },
  live_view_unavailable: { status: 404, message: 'No live view for this instance' },
  live_view_not_found: { status: 404, message: 'Unknown live view path' },
  live_view_closed: { status: 410, message: 'The live view is closed' },
  live_view_failed: { status: 502, message: 'The live view is not available' },
  // --- burrow extension: hand-off to a person (instances/handoffs.ts) ---
  handoff_not_found: { status: 404, message: 'Hand-off {id} of instance {instance} not found' },
  auth_state_not_found: { status: 404, message: 'Auth state {id} not found' },
  auth_state_name_ambiguous: {
    status: 409,
    message:
      'Several auth states are named {name} ({ids}); delete all but one, or use another name',
  },
  auth_state_unreadable: {
    status: 503,
    message: 'Auth state {id} cannot be read: {reason}',
  },
  auth_state_too_large: {
    status: 413,
    message:
      "The browser's auth state is larger than {limit} bytes ({reason}); nothing was saved (the server's limit; BURROW_MAX_AUTH_STATE_BYTES raises it)",
  },
  auth_state_too_many_values: {
    status: 413,
    message:
      "The browser's auth state holds more than {limit} values in its localStorage, sessionStorage and IndexedDB ({reason}); nothing was saved (the server's limit)",
  },
  auth_state_not_applied: {
    status: 409,
    message: 'The auth state could not be fully applied: {reason}',
  },

  // --- browser extensions (extensions/) ---
  extension_too_large: {
    status: 413,
    message:
      "Extension larger than {limit} bytes (the server's limit; BURROW_MAX_EXTENSION_BYTES raises it)",
    headers: CLOSE,
  },
  extension_not_found: { status: 404, message: 'Extension {id} not found' },
  extension_unusable: {
    status: 409,
    message:
      'Extension {id} cannot be copied into the instance ({reason}); delete it and upload it again',
  },
  profile_in_use: {
    status: 409,
    message: 'Profile {name} is in use by {holder}; stop that instance first',
  },
  profile_not_found: { status: 404, message: 'Profile {name} not found' },
  profile_unreadable: { status: 409, message: 'Profile {name} cannot be restored: {reason}' },
  profile_restore_busy: {
    status: 503,
    message:
      'Profile {name} was not restored: other profiles held in memory left no room for {seconds} s (maxProfileBytesReadBack); retry',
    headers: { 'Retry-After': '10' },
  },
  profiles_browser_only: {
    status: 400,
    message: 'profiles are kept by browser instances only, not by {type} instances',
  },
  extensions_browser_only: {
    status: 400,
    message: 'extensions are loaded by browser instances only, not by {type} instances',
  },
  // --- caps on what is kept (config.ts: storeCaps) ---
  store_full: {
    status: 507,
    message: 'No room for {what}: {reason}; delete some to make room',
  },
  // --- devices and identity (chromium/identity.ts) ---
  identity_browser_only: {
    status: 400,
    message:
      'device, user_agent, locale, timezone_id and geolocation apply to browser instances only, not to {type} instances',
  },

  // --- environment, files, uploads ---
  invalid_env_name: { status: 400, message: 'Invalid environment variable name: {name}' },
  invalid_env_value: { status: 400, message: 'The value of {name} contains a NUL character' },
  upload_refused: { status: 400, message: '{reason}' },
  disk_full: { status: 413, message: '{reason}' },
  files_unavailable: { status: 503, message: '{reason}' },

  // --- downloads and recordings (burrow extension, artifacts.ts) ---
  download_not_found: { status: 404, message: 'Download {id} not found' },
  recording_not_found: { status: 404, message: 'Recording {id} not found' },
  artifact_in_progress: {
    status: 409,
    message: 'The {kind} {id} is still being written; fetch it once it is completed',
  },
  artifact_unavailable: { status: 409, message: 'The {kind} {id} is {state} and has no file' },
  recording_in_progress: {
    status: 409,
    message: 'Recording {id} is running; stop it before starting another',
  },
  no_recording: { status: 409, message: 'No recording is running on this instance' },
  recording_unavailable: { status: 400, message: 'This instance cannot record right now' },
  screenshot_failed: { status: 409, message: 'The screenshot failed: {reason}' },
  recording_failed: { status: 500, message: 'The recording could not start: {reason}' },

  // --- kernels and notebooks ---
  unknown_kernel: { status: 400, message: "Unknown kernel '{name}'" },
  unknown_notebook_kernel: {
    status: 400,
    message: "Unknown kernel '{name}'; installed kernels: {installed}",
  },
  kernel_failed_to_start: { status: 503, message: "Kernel '{name}' did not start: {reason}" },
  kernel_bridge_error: { status: 500, message: 'Kernel bridge error: {reason}' },
  kernels_unavailable: { status: 503, message: 'Kernels are unavailable: {reason}' },
  notebook_not_found: { status: 404, message: "Notebook '{id}' not found" },
  cell_not_found: { status: 404, message: "Cell '{cell}' not found in notebook '{notebook}'" },
  notebook_invalid: { status: 400, message: 'notebooks/{id}.ipynb is {reason}' },
  notebook_too_large: {
    status: 400,
    message: 'notebooks/{id}.ipynb is too large for the server to read: {reason}',
  },
  notebook_file_refused: { status: 400, message: 'notebooks/{id}.ipynb: {reason}' },
  notebook_files_unavailable: { status: 503, message: 'Notebook files are unavailable: {reason}' },

  // --- generic ---
  internal_error: { status: 500, message: 'Internal server error' },
} as const satisfies Record<string, ServerErrorRow>;

export type ServerErrorCode = keyof typeof SERVER_ERRORS;
/** Every status the server answers an error with (422 aside). */
export type ErrorStatus = (typeof SERVER_ERRORS)[ServerErrorCode]['status'];

/** The placeholder names of a message template: `'a {x} b {y}'` → `'x' | 'y'`. */
type Placeholders<S extends string> = S extends `${string}{${infer P}}${infer Rest}`
  ? P | Placeholders<Rest>
  : never;

/** The params `serverError(code, …)` needs: one per placeholder of the row's message. */
export type ServerErrorParams<C extends ServerErrorCode> = {
  readonly [P in Placeholders<(typeof SERVER_ERRORS)[C]['message']>]: string | number;
};

type ParamArgs<C extends ServerErrorCode> = [
  Placeholders<(typeof SERVER_ERRORS)[C]['message']>,
] extends [never]
  ? []
  : [params: ServerErrorParams<C>];

/** `template` with its `{name}` placeholders replaced, in one pass (params are not re-read). */
export function formatMessage(template: string, params: Readonly<Record<string, unknown>>): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) =>
    name in params ? String(params[name]) : whole,
  );
}

/** A non-422 error answer: a catalogue row with its message filled in. */
export class HttpError extends Error {
  /** Make one with `serverError(code, params)`; this takes a finished `detail`. */
  constructor(
    readonly code: ServerErrorCode,
    readonly detail: string,
    /** The row's status and headers: the row's, except a Retry-After computed per answer. */
    readonly status: ErrorStatus = SERVER_ERRORS[code].status,
    readonly headers: Readonly<Record<string, string>> = (SERVER_ERRORS[code] as ServerErrorRow)
      .headers ?? {},
  ) {
    super(detail);
    this.name = 'HttpError';
  }

  /** The headers of the answer: the row's and `x-burrow-error`. */
  get responseHeaders(): Record<string, string> {
    return { ...this.headers, 'x-burrow-error': this.code };
  }
}

/** The error of catalogue row `code`, its message filled from `params`. */
export function serverError<C extends ServerErrorCode>(code: C, ...args: ParamArgs<C>): HttpError {
  const params: Readonly<Record<string, unknown>> = args[0] ?? {};
  return new HttpError(code, formatMessage(SERVER_ERRORS[code].message, params));
}

/** `err` as a complete HTTP/1.1 response that closes the connection, for raw sockets. */
export function rawErrorResponse(err: HttpError): string {
  const body = JSON.stringify({ detail: err.detail });
  const extra = Object.entries(err.responseHeaders).filter(
    ([k]) => k.toLowerCase() !== 'connection',
  );
  const head = [
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? ''}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...extra.map(([k, v]) => `${k}: ${v}`),
  ];
  return `${head.join('\r\n')}\r\n\r\n${body}`;
}

/** Answer a WebSocket upgrade (or any raw request) with `err` and close the socket. */
export function refuseUpgrade(socket: Duplex, err: HttpError): void {
  if (socket.destroyed) return;
  socket.end(rawErrorResponse(err));
}
