/**
 * What an instance type implements. The registry owns the life cycle (ids, status, expiry, the
 * cap); a runtime owns the processes. What an instance offers besides its life cycle is a set of
 * capability objects (`computer`, `tools`, `files`, `kernels`, `env`, `browser`, `liveView`); a
 * capability the type lacks is absent, and one lookup (`Registry.capability`)
 * answers the 400 naming the type. A runtime is made with a read-only `RuntimeContext`: who the
 * instance is, what its start asked for (the registry's plan, plan.ts) and what the server lends
 * it.
 */
import type { EncodedJson } from '../../internal/encoded-json.js';
import type { BrowserIdentity } from '../../api/identity.js';
import { createHmac } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type {
  BashRequest,
  CodeExecuteResult,
  EditRequest,
  FileRequest,
  IndexedDBDatabase,
  InstanceLimits,
  InstanceType,
  KernelInfo,
  Notebook,
  NotebookCell,
  ParsedComputerAction,
  ToolResult,
  UploadResult,
} from '../../api/index.js';
import type { z } from 'zod';
import type { InstanceArtifacts } from '../artifacts/store.js';
import type { Sandbox, SandboxHost, UpstreamProxy } from '../sandbox/index.js';
import type { ProgramPaths } from '../config.js';
import type { AddCellRequest, ExecuteCellRequest } from '../../api/index.js';

export type { Logger } from '../../internal/log.js';
import type { Logger } from '../../internal/log.js';

/** Who the instance is: fixed for its life. */
export interface InstanceIdentity {
  readonly id: string;
  readonly type: InstanceType;
  /** The instance's own directory; created before `start`, removed by the registry after `stop`. */
  readonly dir: string;
  /**
   * Per-instance secret carried by `cdp_url` (it opens DevTools and the live view); `stream_url`
   * carries `liveViewToken` of it. Dies with the instance.
   */
  readonly token: string;
}

/**
 * The token of an instance's live view (`stream_url`), derived from its secret: it opens the
 * live-view page and its socket only, never `/cdp`, so a live-view link lent to someone is not
 * DevTools over the instance (cookies, `Runtime.evaluate`). Derived rather than kept, so every
 * node of a cluster and every restart of the server's handlers agree on it without storing it.
 */
export function liveViewToken(token: string): string {
  return createHmac('sha256', token).update('burrow live view').digest('base64url');
}

/**
 * What its start asked for, resolved (the runtime's part of the registry's `StartPlan`,
 * plan.ts). A warm-pool claim replaces it with the user's (`claimedContext`).
 */
export interface InstancePlan {
  /** `[width, height]` in pixels. */
  readonly resolution: readonly [number, number];
  /** Bare host names whose host and subdomains the instance's browsers must refuse. */
  readonly blockedDomains: readonly string[];
  /**
   * Started for the warm pool (src/server/instances/pool.ts): run at a low CPU weight, and be
   * ready for `claim`.
   */
  readonly pooled: boolean;
  /**
   * A sandbox made ahead for this instance (src/server/sandbox/stock.ts), named by its id: the
   * start takes it instead of building one. Default: the start builds its own.
   */
  readonly sandbox?: Sandbox | undefined;
  /** The upstream proxy its egress chains to (`proxy` of the start), credentials included. */
  readonly upstream?: UpstreamProxy | undefined;
  /**
   * Browser extensions the instance's Chromium loads (browser instances only): each is copied
   * read-only onto the instance's disk before anything runs in it.
   */
  readonly extensions: readonly InstanceExtension[];
  /** The persistent profile the instance's Chromium runs with (browser instances only). */
  readonly profile?: InstanceProfile | undefined;
  /** Device and identity every page of the instance's Chromium gets (browser instances only). */
  readonly identity?: BrowserIdentity | undefined;
}

/** What the server lends every instance, and how the instance tells the registry. */
export interface InstanceServices {
  /**
   * Base for URLs handed to clients, e.g. `http://127.0.0.1:8787` (http scheme; swap to ws for
   * WebSockets). WebSocket paths: `/cdp/<id>/...` and `/stream/<id>/...` reach `upgrade`.
   */
  readonly publicUrl: string;
  readonly log: Logger;
  /** Path of the Chromium binary to spawn. */
  readonly chromiumPath: string;
  /**
   * Chromium's operator flags and the other programs of instances (src/server/config.ts). Default
   * `DEFAULT_PROGRAMS`.
   */
  readonly programs?: ProgramPaths | undefined;
  /** Largest upload accepted, in bytes. */
  readonly maxUploadBytes: number;
  /** The server-wide sandbox layer every instance is built with (src/server/sandbox/). */
  readonly sandboxHost: SandboxHost;
  /** The instance's downloads and recordings (artifacts/store.ts); kept past its stop. */
  readonly artifacts?: InstanceArtifacts | undefined;
  /** Tell the registry a process died on its own: the instance goes to `error`. */
  readonly failed: (reason: string) => void;
  /**
   * Something happened that no call answers for (an upstream proxy failed, a profile was not
   * saved): kept with the instance and shown by `GET /v1/instance/{id}` (`events`).
   */
  readonly event?: ((type: string, message: string) => void) | undefined;
}

/**
 * What a runtime is made with: who the instance is, what its start asked for, what the server
 * lends it. Frozen (`runtimeContext`): a part that needs another value gets a new context, never
 * an edited one.
 */
export interface RuntimeContext {
  readonly instance: InstanceIdentity;
  readonly plan: InstancePlan;
  readonly services: InstanceServices;
}

/**
 * The context of `parts`, frozen with its groups and their lists (the objects they hold, a
 * sandbox, a logger, a profile, stay as they are).
 */
export function runtimeContext(parts: RuntimeContext): RuntimeContext {
  const { plan } = parts;
  return Object.freeze({
    instance: Object.freeze({ ...parts.instance }),
    plan: Object.freeze({
      ...plan,
      resolution: Object.freeze([plan.resolution[0], plan.resolution[1]] as const),
      blockedDomains: Object.freeze([...plan.blockedDomains]),
      extensions: Object.freeze(plan.extensions.map((e) => Object.freeze({ ...e }))),
    }),
    services: Object.freeze({ ...parts.services }),
  });
}

/** `ctx` with `services` added to what the server lends (e.g. the instance's artifacts). */
export function withServices(
  ctx: RuntimeContext,
  services: Partial<InstanceServices>,
): RuntimeContext {
  return runtimeContext({ ...ctx, services: { ...ctx.services, ...services } });
}

/** `ctx` once a warm-pool claim handed the instance to its user: the user's values, no pool. */
export function claimedContext(ctx: RuntimeContext, req: ClaimRequest): RuntimeContext {
  const { upstream: _pooled, ...plan } = ctx.plan;
  return runtimeContext({
    ...ctx,
    plan: {
      ...plan,
      pooled: false,
      resolution: req.resolution,
      blockedDomains: req.blockedDomains,
      ...(req.upstream && { upstream: req.upstream }),
    },
  });
}

/** An uploaded browser extension as an instance gets it (extensions/store.ts). */
export interface InstanceExtension {
  /** The store's id, e.g. `ext_0123456789abcdef`. */
  readonly id: string;
  /** The unpacked extension on the host; read, never written. */
  readonly dir: string;
}

/** A file or directory of a browser profile, its path relative to the profile's directory. */
export interface ProfileEntry {
  readonly path: string;
  /** Absent for a directory. */
  readonly data?: Buffer;
}

/**
 * A persistent browser profile an instance runs with (profiles/store.ts): what to restore before
 * Chromium first starts, and, when changes are saved, where its profile goes once Chromium has
 * exited. The instance holds the profile until `release`.
 */
export interface InstanceProfile {
  readonly name: string;
  /**
   * Hands the saved profile's files (none for a new profile) to `use`, once: the server keeps no
   * copy of them after, and gives back the room they took in its budget of profiles held in
   * memory when `use` is done.
   */
  restore<T>(use: (entries: readonly ProfileEntry[]) => Promise<T>): Promise<T>;
  /** Largest profile kept, in bytes: a bigger one is not saved. */
  readonly maxBytes: number;
  /**
   * Present when `save_changes`: stores the profile as Chromium left it, as `read` reads it back.
   * `read` tells `charge` the bytes it will hold before it reads any (the save may wait there
   * for its turn in the server's budget of profiles read back at once).
   */
  readonly save?: (
    read: (charge: (bytes: number) => Promise<void>) => Promise<ProfileEntry[]>,
  ) => Promise<void>;
  /** Lets another instance take the profile (idempotent). */
  release(): void;
}

/** What `POST /v1/start` resolved and holds for the registry besides the plan (plan.ts). */
export interface StartResources {
  extensions?: readonly InstanceExtension[];
  profile?: InstanceProfile;
  /** Told each id the start gives the instance (a failed attempt's retry gets a new one). */
  onCreate?: (id: string) => void;
}

/** What `POST /v1/start` asked of an instance taken from the warm pool. */
export interface ClaimRequest {
  resolution: readonly [number, number];
  blockedDomains: readonly string[];
  /** The upstream proxy the egress chains to from now on, if any. */
  upstream?: UpstreamProxy | undefined;
}

/** Cookies, localStorage, sessionStorage and IndexedDB of a browser, as saved in an auth state. */
export interface BrowserAuthData {
  /** CDP `Network.Cookie` objects, HttpOnly ones included. */
  cookies: Record<string, unknown>[];
  /** origin → key → value */
  localStorage: Record<string, Record<string, string>>;
  /** origin → key → value */
  sessionStorage: Record<string, Record<string, string>>;
  /** origin → its IndexedDB databases, in Playwright's form (absent in states of burrow 0.1). */
  indexedDB?: Record<string, IndexedDBDatabase[]>;
}

export interface BrowserCapability {
  /** Start the browser if it is not running; return its `cdp_url`. */
  start(): Promise<string>;
  /** `cdp_url` of the running browser; throws a 400 HttpError when none runs. */
  cdpUrl(): string;
  /** URL of the active tab. */
  currentUrl(): Promise<string>;
  /**
   * The browser's auth state; past `maxBytes` of its JSON a 413 (`auth_state_too_large`), the
   * browser measuring each large piece before the server reads it.
   */
  captureAuth(maxBytes: number): Promise<BrowserAuthData>;
  applyAuth(data: BrowserAuthData): Promise<void>;
  stop(): Promise<void>;
}

export interface NotebookCapability {
  kernels(): Promise<KernelInfo[]>;
  create(name: string, kernelName: string): Promise<Notebook>;
  // answers that hold what the instance's file holds are encoded off the main thread
  get(notebookId: string): Promise<EncodedJson<Notebook>>;
  delete(notebookId: string): Promise<Record<string, unknown>>;
  addCell(
    notebookId: string,
    cell: z.output<typeof AddCellRequest>,
  ): Promise<EncodedJson<NotebookCell>>;
  executeCell(
    notebookId: string,
    cellId: string,
    opts: z.output<typeof ExecuteCellRequest>,
  ): Promise<EncodedJson<NotebookCell>>;
  execute(
    notebookId: string,
    opts: z.output<typeof ExecuteCellRequest>,
  ): Promise<EncodedJson<NotebookCell[]>>;
}

/** The instance's screen: screenshots and `computer` actions. */
export interface ComputerCapability {
  screenshot(): Promise<Buffer>;
  run(action: ParsedComputerAction): Promise<ToolResult>;
}

/** The agent tools of a desktop: persistent shells and the edit and file tools. */
export interface ToolsCapability {
  bash(req: BashRequest): Promise<ToolResult>;
  edit(req: EditRequest): Promise<ToolResult>;
  file(req: FileRequest): Promise<ToolResult>;
}

/** Files into the instance (`POST /v1/instance/{id}/upload`). */
export interface FilesCapability {
  upload(
    path: string,
    filename: string,
    mediaType: string | undefined,
    file: Readable,
  ): Promise<UploadResult>;
  /**
   * Where an upload whose `path` part comes after its file part waits for it (http/upload.ts): a
   * host directory on the instance's own disk that only the server reaches, so the bytes count
   * against the instance's disk quota. Undefined: the instance has no disk of its own (the
   * registry's instance directory is used).
   */
  spoolDir?(): string | undefined;
}

/** Jupyter kernels: one-off code execution and notebooks. */
export interface KernelsCapability {
  execute(
    code: string,
    kernelName: string,
    timeoutSeconds: number | undefined,
  ): Promise<EncodedJson<CodeExecuteResult>>;
  readonly notebooks: NotebookCapability;
}

/** The live view: its URL, and the pages served under `/stream/<id>/` (token checked). */
export interface LiveViewCapability {
  url(): Promise<string>;
  page(rest: string, query: URLSearchParams): Promise<StreamPage>;
}

export interface EnvCapability {
  get(): Promise<Record<string, string>>;
  set(vars: Record<string, string>): Promise<void>;
  delete(keys: string[]): Promise<void>;
}

export interface InstanceRuntime {
  /** Bring the instance up; resolve when it is `running`, reject (and clean up) on failure. */
  start(): Promise<void>;
  /** Kill every process of the instance (TERM, then KILL) and wait for them. Idempotent. */
  stop(): Promise<void>;
  /** Freeze every process of the instance (SIGSTOP). */
  pause(): Promise<void>;
  /** Thaw them (SIGCONT). */
  resume(): Promise<void>;
  /**
   * A pooled instance gets its first user: apply `req` and run at normal priority. Resolves false
   * when this instance cannot honour `req` (the registry then starts a fresh one). Only runtimes
   * that support the warm pool implement it.
   */
  claim?(req: ClaimRequest): Promise<boolean>;
  /**
   * The instance was stopped: close client connections (CDP relay, live view) now, before the
   * teardown that follows in the background. Must not throw or wait.
   */
  revoke?(): void;
  /** Downloads and recordings (artifacts/store.ts): listed and fetched after the stop too. */
  readonly artifacts?: InstanceArtifacts | undefined;
  /** What the instance may use (its sandbox's limits), once started. */
  readonly limits?: InstanceLimits | undefined;

  readonly computer?: ComputerCapability;
  readonly tools?: ToolsCapability;
  readonly files?: FilesCapability;
  readonly kernels?: KernelsCapability;
  readonly env?: EnvCapability;
  readonly browser?: BrowserCapability;
  readonly liveView?: LiveViewCapability;
  /**
   * A WebSocket upgrade for `/cdp/<id>/<rest>` (kind `cdp`) or `/stream/<id>/<rest>` (kind
   * `stream`) whose token the server has already checked.
   */
  upgrade?(
    kind: 'cdp' | 'stream',
    rest: string,
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): void;
}

/** The capabilities a runtime may offer, by name. */
export type CapabilityName =
  'computer' | 'tools' | 'files' | 'kernels' | 'env' | 'browser' | 'liveView';

/** The answer to a GET under `/stream/<id>/<rest>`: the route sends it with `no-store`. */
export interface StreamPage {
  status: number;
  /** `Content-Type`. */
  type: string;
  body: Buffer | string;
}

export type RuntimeFactory = (ctx: RuntimeContext) => InstanceRuntime | Promise<InstanceRuntime>;
