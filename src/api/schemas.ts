/**
 * The wire contract: every request and response body of the Remote Instance Control Service
 * (docs/spec/API.md, with the records docs/spec/COMPAT.md fills in). Wire names stay snake_case.
 *
 * Request schemas are what the server validates with (unknown keys are ignored, as FastAPI
 * does); response schemas are loose so that a newer server never breaks an older client.
 */
import { z } from 'zod';
import { StartProfile } from './extensions.js';
import { DeviceName, Geolocation, Locale, TimeZoneId } from './identity.js';
import { ProxySettings } from './proxy.js';

/**
 * The instance types burrow runs, in the order it lists and fills them. Every list or table keyed
 * by type (the warm pool, the runtimes, requirements, placement) derives from this one.
 */
export const INSTANCE_TYPES = ['browser', 'ubuntu'] as const;
export type RunnableInstanceType = (typeof INSTANCE_TYPES)[number];
/**
 * The instance types the wire names, in the spec's order (its 422 messages list them so): those
 * burrow runs, and `windows`, which it refuses.
 */
export const WIRE_INSTANCE_TYPES = ['ubuntu', 'browser', 'windows'] as const satisfies readonly (
  RunnableInstanceType | 'windows'
)[];
export const INSTANCE_STATUSES = [
  'deploying',
  'running',
  'paused',
  'terminated',
  'error',
  'warm_pool',
] as const;

export const InstanceType = z.enum(WIRE_INSTANCE_TYPES);
export type InstanceType = z.output<typeof InstanceType>;
export const InstanceStatus = z.enum(INSTANCE_STATUSES);
export type InstanceStatus = z.output<typeof InstanceStatus>;

/** Largest width or height accepted for `resolution`, in pixels. */
export const MAX_RESOLUTION = 7680;

/** `[width, height]` in pixels (COMPAT.md); both positive integers. */
export const Resolution = z.tuple([
  z.int().min(1).max(MAX_RESOLUTION),
  z.int().min(1).max(MAX_RESOLUTION),
]);
export type Resolution = z.output<typeof Resolution>;

/** A bare host name as `blocked_domains` takes it: no scheme, path or port. */
export const BlockedDomain = z
  .string()
  .min(1)
  .max(253)
  .regex(/^(?!-)[A-Za-z0-9.-]+$/, 'a bare host name such as "example.com"');

// ---------------------------------------------------------------------------------------------
// Records

/** burrow extension: what an instance may use (null: no such limit on this server). */
export const InstanceLimits = z.looseObject({
  memory_bytes: z.number().nullable(),
  pids: z.number().nullable(),
  cpus: z.number().nullable(),
  disk_bytes: z.number().nullable(),
});
export type InstanceLimits = z.output<typeof InstanceLimits>;

/**
 * burrow extension: why an instance ended. In a cluster, `node_lost`: the node it ran on died
 * (its lease ran out and it did not answer probes; the instance is `error`); `node_drained`: its
 * node was drained and the drain deadline passed while it still ran.
 */
export const EndReason = z.enum([
  'stopped',
  'expired',
  'crashed',
  'server_restart',
  'idle',
  'node_lost',
  'node_drained',
]);
export type EndReason = z.output<typeof EndReason>;

/**
 * burrow extension: something that happened to an instance that no call answered for (an
 * upstream proxy failing, a profile not saved at stop): `type` a short code, `message` why.
 */
export const InstanceEvent = z.looseObject({
  at: z.string(),
  type: z.string(),
  message: z.string(),
});
export type InstanceEvent = z.output<typeof InstanceEvent>;

export const Instance = z.looseObject({
  id: z.string(),
  launch_time: z.string(),
  instance_type: InstanceType,
  status: InstanceStatus,
  resolution: z.array(z.int()).optional(),
  /** burrow extension (absent from other servers). */
  limits: InstanceLimits.optional(),
  /** burrow extension: set once the instance is terminated or in error. */
  end_reason: EndReason.optional(),
  /** burrow extension: what happened to it that no call answered for, oldest first (at most 50). */
  events: z.array(InstanceEvent).optional(),
  /** burrow extension: the upstream proxy it was started with, never with its credentials. */
  proxy: z.looseObject({ server: z.string() }).optional(),
  // --- burrow extension: session time (src/api/session-time.ts) ---
  /** When the instance expires unless extended (ISO 8601); while it is live. */
  expires_at: z.string().optional(),
  /** Whole seconds until `expires_at`, as of the answer; while it is live. */
  time_left_seconds: z.number().optional(),
  /** The idle timeout it was started with, if any. */
  idle_timeout_seconds: z.number().optional(),
});
export type Instance = z.output<typeof Instance>;

export const AuthState = z.looseObject({
  id: z.string(),
  name: z.string().nullish(),
});
export type AuthState = z.output<typeof AuthState>;

export const NotebookCellType = z.enum(['code', 'markdown', 'raw']);
export type NotebookCellType = z.output<typeof NotebookCellType>;

export const NotebookCell = z.looseObject({
  id: z.string(),
  type: NotebookCellType,
  content: z.string(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  outputs: z.array(z.record(z.string(), z.unknown())).nullish(),
  execution_count: z.int().nullish(),
});
export type NotebookCell = z.output<typeof NotebookCell>;

export const Notebook = z.looseObject({
  id: z.string(),
  name: z.string(),
  kernel_name: z.string(),
  cells: z.array(NotebookCell),
  metadata: z.record(z.string(), z.unknown()).nullish(),
});
export type Notebook = z.output<typeof Notebook>;

export const KernelInfo = z.looseObject({
  name: z.string(),
  display_name: z.string(),
  language: z.string(),
});
export type KernelInfo = z.output<typeof KernelInfo>;

export const UploadResult = z.looseObject({
  filename: z.string(),
  path: z.string(),
  media_type: z.string().nullish(),
});
export type UploadResult = z.output<typeof UploadResult>;

export const SaveAuthResult = z.looseObject({
  status: z.string(),
  auth_state_id: z.string(),
  name: z.string().nullish(),
});
export type SaveAuthResult = z.output<typeof SaveAuthResult>;

/** Result of computer, bash, edit and file actions: all four fields optional strings. */
export const ToolResult = z.looseObject({
  output: z.string().nullish(),
  error: z.string().nullish(),
  base64_image: z.string().nullish(),
  system: z.string().nullish(),
});
export type ToolResult = z.output<typeof ToolResult>;

export const StatusResult = z.looseObject({ status: z.string() });
export type StatusResult = z.output<typeof StatusResult>;

export const BrowserStartResult = z.looseObject({ cdp_url: z.string() });
export type BrowserStartResult = z.output<typeof BrowserStartResult>;

export const CdpUrlResult = z.looseObject({ cdp_url: z.string() });
export type CdpUrlResult = z.output<typeof CdpUrlResult>;

export const CurrentUrlResult = z.looseObject({ current_url: z.string() });
export type CurrentUrlResult = z.output<typeof CurrentUrlResult>;

export const ScreenshotResult = z.looseObject({ base64_image: z.string() });
export type ScreenshotResult = z.output<typeof ScreenshotResult>;

export const StreamUrlResult = z.looseObject({ stream_url: z.string() });
export type StreamUrlResult = z.output<typeof StreamUrlResult>;

export const EnvGetResult = z.looseObject({ variables: z.record(z.string(), z.string()) });
export type EnvGetResult = z.output<typeof EnvGetResult>;

export const EnvStatusResult = z.looseObject({ status: z.string(), message: z.string() });
export type EnvStatusResult = z.output<typeof EnvStatusResult>;

export const NotebookDeleteResult = z.record(z.string(), z.unknown());
export type NotebookDeleteResult = z.output<typeof NotebookDeleteResult>;

/** One nbformat v4 output object (`stream`, `execute_result`, `display_data`, `error`). */
export const NbOutput = z.looseObject({ output_type: z.string() });
export type NbOutput = z.output<typeof NbOutput>;

/** code/execute: untyped upstream; this shape is COMPAT.md's decision. */
export const CodeExecuteResult = z.looseObject({
  status: z.enum(['ok', 'error', 'timeout']),
  execution_count: z.int().nullable(),
  outputs: z.array(NbOutput),
  stdout: z.string(),
  stderr: z.string(),
  error: z
    .looseObject({ ename: z.string(), evalue: z.string(), traceback: z.array(z.string()) })
    .nullable(),
});
export type CodeExecuteResult = z.output<typeof CodeExecuteResult>;

// ---------------------------------------------------------------------------------------------
// Requests

export const StartRequest = z.object({
  /** Default `ubuntu`, as upstream. */
  instance_type: InstanceType.default('ubuntu'),
  /** Hours until the instance is terminated. */
  timeout_hours: z.number().min(0.01).max(24).default(1),
  blocked_domains: z.array(BlockedDomain).optional(),
  /** `[width, height]` in pixels; default `[1024, 768]`. */
  resolution: Resolution.optional(),
  /** burrow extension: an upstream proxy the instance's egress chains to (isolated mode only). */
  proxy: ProxySettings.optional(),
  // --- burrow extension: session time (src/api/session-time.ts) ---
  /**
   * Seconds without an API call for the instance and without a CDP or live-view client, after
   * which it is stopped with `end_reason: "idle"`. Absent: no idle timeout.
   */
  idle_timeout_seconds: z.int().min(1).max(86_400).optional(),
  // --- burrow extensions of the start request ---
  /** Ids of uploaded browser extensions (`POST /v1/extensions`) to load; browser instances only. */
  extensions: z.array(z.string().min(1).max(64)).max(20).optional(),
  /** A persistent browser profile by name, restored at start; browser instances only. */
  profile: StartProfile.optional(),
  // --- burrow extension: devices and identity (src/api/identity.ts); browser instances only ---
  /** A Playwright device name, e.g. `"Pixel 5"`: viewport, scale, mobile, touch, user agent. */
  device: DeviceName.optional(),
  /** The user agent every page sends and sees (over the device's). */
  user_agent: z.string().min(1).max(1000).optional(),
  /** BCP 47 locale: `navigator.language`, `Intl`, the `Accept-Language` header. */
  locale: Locale.optional(),
  /** IANA time zone, e.g. `"Europe/Berlin"`. */
  timezone_id: TimeZoneId.optional(),
  /** The position pages get; the geolocation permission is granted. */
  geolocation: Geolocation.optional(),
});
export type StartRequest = z.input<typeof StartRequest>;

export const BashRequest = z.object({
  command: z.string().optional(),
  session: z.int().min(1).optional(),
  restart: z.boolean().optional(),
  list_sessions: z.boolean().optional(),
  check_session: z.int().min(1).optional(),
  /** Seconds; default 10. */
  timeout: z.number().gt(0).max(86_400).optional(),
});
export type BashRequest = z.input<typeof BashRequest>;

export const EDIT_COMMANDS = ['view', 'create', 'str_replace', 'insert', 'undo_edit'] as const;
export const EditRequest = z.object({
  command: z.enum(EDIT_COMMANDS),
  path: z.string(),
  file_text: z.string().optional(),
  view_range: z.array(z.int()).optional(),
  old_str: z.string().optional(),
  new_str: z.string().optional(),
  insert_line: z.int().optional(),
});
export type EditRequest = z.input<typeof EditRequest>;

export const FILE_COMMANDS = [
  'read',
  'write',
  'append',
  'delete',
  'exists',
  'list',
  'mkdir',
  'rmdir',
  'move',
  'copy',
  'view',
  'create',
  'replace',
  'insert',
  'delete_lines',
  'undo',
  'grep',
] as const;

/** `command` is a plain string on the wire: an unknown one is a 200 with `error` (COMPAT.md). */
export const FileRequest = z.object({
  command: z.string(),
  path: z.string().optional(),
  content: z.string().optional(),
  mode: z.string().optional(),
  encoding: z.string().optional(),
  view_range: z.array(z.int()).optional(),
  recursive: z.boolean().optional(),
  src: z.string().optional(),
  dst: z.string().optional(),
  old_str: z.string().optional(),
  new_str: z.string().optional(),
  line: z.int().optional(),
  text: z.string().optional(),
  lines: z.array(z.int()).optional(),
  all_occurrences: z.boolean().optional(),
  pattern: z.string().optional(),
  case_sensitive: z.boolean().optional(),
  line_numbers: z.boolean().optional(),
});
export type FileRequest = z.input<typeof FileRequest>;

/** The non-file part of the upload's multipart body. */
export const UploadFields = z.object({ path: z.string().min(1) });
export type UploadFields = z.input<typeof UploadFields>;

export const CodeExecuteRequest = z.object({
  code: z.string(),
  kernel_name: z.string().min(1).default('python3'),
  /** Seconds. */
  timeout: z.int().min(1).optional(),
});
export type CodeExecuteRequest = z.input<typeof CodeExecuteRequest>;

export const NotebookCreateRequest = z.object({
  name: z.string(),
  kernel_name: z.string().min(1).default('python3'),
});
export type NotebookCreateRequest = z.input<typeof NotebookCreateRequest>;

export const AddCellRequest = z.object({
  type: NotebookCellType,
  content: z.string(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});
export type AddCellRequest = z.input<typeof AddCellRequest>;

export const ExecuteCellRequest = z.object({
  /** Seconds. */
  timeout: z.int().min(1).optional(),
});
export type ExecuteCellRequest = z.input<typeof ExecuteCellRequest>;

/** POSIX environment variable names. */
export const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'a variable name');

export const EnvSetRequest = z.object({
  variables: z.record(EnvName, z.string()),
});
export type EnvSetRequest = z.input<typeof EnvSetRequest>;

export const EnvDeleteRequest = z.object({
  keys: z.array(EnvName),
});
export type EnvDeleteRequest = z.input<typeof EnvDeleteRequest>;

// ---------------------------------------------------------------------------------------------
// Query strings. Values arrive as strings; numbers are parsed here, not coerced blindly.

/** A query-string number: rejects '', 'abc' and NaN instead of turning them into 0. */
export const queryNumber = () =>
  z.preprocess(
    (v) => (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v),
    z.number(),
  );

export const ResumeQuery = z.object({
  /** Hours until expiry, counted from the resume. */
  timeout_hours: queryNumber().pipe(z.number().min(0.01).max(24)).default(1),
});
export type ResumeQuery = z.input<typeof ResumeQuery>;

export const SaveAuthQuery = z.object({ name: z.string().optional() });
export type SaveAuthQuery = z.input<typeof SaveAuthQuery>;

export const ModifyAuthQuery = z.object({
  auth_state_id: z.string().min(1),
  name: z.string().optional(),
});
export type ModifyAuthQuery = z.input<typeof ModifyAuthQuery>;

export const AuthenticateQuery = z.object({ auth_state_id: z.string().min(1) });
export type AuthenticateQuery = z.input<typeof AuthenticateQuery>;

// ---------------------------------------------------------------------------------------------
// Path parameters

const pathId = z.string().min(1);
export const InstancePath = z.object({ instance_id: pathId });
export const NotebookPath = z.object({ instance_id: pathId, notebook_id: pathId });
export const CellPath = z.object({ instance_id: pathId, notebook_id: pathId, cell_id: pathId });
