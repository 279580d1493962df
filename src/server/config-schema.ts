/**
 * What the server's settings are: the options `startServer` takes (and their schema, which
 * checks them), the resolved `ServerConfig` every room is handed a part of, and the defaults. The
 * defaults are said here and nowhere else: a room that needs one imports it. Reading the
 * environment is config.ts's; putting options, environment and defaults together is
 * config-resolve.ts's; the documented table is config-table.ts's.
 */
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { INSTANCE_TYPES, type RunnableInstanceType } from '../api/index.js';

/** Instances kept started per type (instances/pool.ts). */
export type WarmPoolSizes = Partial<Record<RunnableInstanceType, number>>;

export interface IsolationOptions {
  /** Instances' browsers may reach every host loopback port but burrow's own. Default false. */
  allowHostLoopback?: boolean;
  /** Host loopback ports instances' browsers may reach. Default none. */
  allowHostPorts?: number[];
  /** Private networks (CIDRs) instances may reach. Default none; env `BURROW_ALLOW_NETWORK`. */
  allowNetworks?: string[];
  /** Start instances even when this machine cannot isolate them (they then run unisolated). */
  insecureNoIsolation?: boolean;
  /**
   * Start instances where this machine cannot limit their memory, processes and CPU (the `limits`
   * guarantee). Default on for `startServer` from code (an embedded server runs one user's own
   * scripts; it says once on stderr what is missing), off for `burrow serve`, whose starts then
   * answer 503 `isolation_unavailable`; env `BURROW_ALLOW_UNLIMITED` (`1` or `0`).
   */
  allowUnlimited?: boolean;
  /** Run instances unisolated even where isolation works (benchmarks of its cost; tests). */
  disable?: boolean;
  /** Memory limit per instance in bytes. Default 2 GiB. */
  memoryBytes?: number;
  /** Processes and threads per instance. Default 1024. */
  pids?: number;
  /** CPU time per instance, in cores. Default all cores but half of one, at least 1. */
  cpus?: number;
  /** Disk quota per instance in bytes. Default 4 GiB. */
  diskBytes?: number;
}

/** What `startServer` accepts; every field is optional (docs/configuration.md). */
export interface ServerOptions {
  /** Interface to bind. Default `127.0.0.1` (loopback only); env `BURROW_HOST`. */
  host?: string;
  /** TCP port; `0` picks a free one. Default `8787`; env `BURROW_PORT`. */
  port?: number;
  /** The API key clients send in `x-api-key`. Default env `BURROW_API_KEY`, else a random one. */
  apiKey?: string;
  /** Where auth states and instance directories live. Default env `BURROW_DATA_DIR`, else `$XDG_DATA_HOME/burrow` or `~/.local/share/burrow`. */
  dataDir?: string;
  /** Live instances allowed at once; past it `start` answers 429. Default 8; env `BURROW_MAX_INSTANCES`. */
  maxInstances?: number;
  /** Largest upload in bytes; past it 413. Default 100 MiB; env `BURROW_MAX_UPLOAD_BYTES`. */
  maxUploadBytes?: number;
  /** Largest browser extension (its zip, and unpacked) in bytes; past it 413. Default 50 MiB; env `BURROW_MAX_EXTENSION_BYTES`. */
  maxExtensionBytes?: number;
  /** Largest persistent browser profile (sealed) in bytes; a bigger one is not saved. Default 200 MiB; env `BURROW_MAX_PROFILE_BYTES`. */
  maxProfileBytes?: number;
  /** Bytes of profiles read back from stopping instances that the server holds at once, every instance's together; a save that does not fit waits its turn (at most 2 min). Default 1 GiB; env `BURROW_MAX_PROFILE_BYTES_READ_BACK`. */
  maxProfileBytesReadBack?: number;
  /** Saved auth states of one project (a single server: of the server); past it a save answers 507. Default 1000; env `BURROW_MAX_AUTH_STATES_PER_PROJECT`. */
  maxAuthStatesPerProject?: number;
  /** Bytes of one auth state as captured from a browser (its JSON, UTF-8); past it save_auth and modify_auth answer 413 and nothing is kept. Default 8 MiB; env `BURROW_MAX_AUTH_STATE_BYTES`. */
  maxAuthStateBytes?: number;
  /** Bytes of the saved auth states of one project together; past it a save answers 507. Default 64 MiB; env `BURROW_MAX_AUTH_STATE_BYTES_PER_PROJECT`. */
  maxAuthStateBytesPerProject?: number;
  /** Bytes of every project’s saved auth states together (the server’s, or the cluster database’s); past it a save answers 507. Default 1 GiB; env `BURROW_MAX_AUTH_STATE_BYTES_TOTAL`. */
  maxAuthStateBytesTotal?: number;
  /** Saved browser profiles of one project; a start naming a new one past it answers 507. Default 50; env `BURROW_MAX_PROFILES_PER_PROJECT`. */
  maxProfilesPerProject?: number;
  /** Sealed bytes of one project’s saved profiles together; a save past it is refused (the old version stays). Default 2 GiB; env `BURROW_MAX_PROFILE_BYTES_PER_PROJECT`. */
  maxProfileBytesPerProject?: number;
  /** Sealed bytes of every project’s saved profiles together; a save past it is refused (the old version stays). Default 20 GiB; env `BURROW_MAX_PROFILE_BYTES_TOTAL`. */
  maxProfileBytesTotal?: number;
  /** Uploaded browser extensions; an upload past it answers 507. Default 100; env `BURROW_MAX_EXTENSIONS`. */
  maxExtensions?: number;
  /** Unpacked bytes of every uploaded extension together; an upload past it answers 507. Default 2 GiB; env `BURROW_MAX_EXTENSION_BYTES_TOTAL`. */
  maxExtensionBytesTotal?: number;
  /** Chromium binary. Default env `BURROW_CHROMIUM`, else `/usr/lib/chromium/chromium`. */
  chromiumPath?: string;
  /** Flags added to every Chromium after burrow's own. Default env `BURROW_CHROMIUM_FLAGS` (space-separated), else none. */
  chromiumFlags?: string[];
  /** Xvfb binary of ubuntu instances. Default env `BURROW_XVFB`, else `/usr/bin/Xvfb`. */
  xvfbPath?: string;
  /** x11vnc binary of ubuntu instances' live view. Default env `BURROW_X11VNC`, else `/usr/bin/x11vnc`. */
  x11vncPath?: string;
  /** Base URL put into `cdp_url` and `stream_url`. Default `http://<host>:<port>` (loopback when bound to all interfaces). */
  publicUrl?: string;
  /** pino log level. Default `warn`; env `BURROW_LOG_LEVEL`. */
  logLevel?: string;
  /** Where log lines go. Default stdout (`burrow mcp` on stdio sends them to stderr). */
  logDestination?: { write(line: string): void };
  /** How instances are isolated (ISOLATION.md in src/server/sandbox/). */
  isolation?: IsolationOptions;
  /**
   * Authenticated connections per client address; past it 429. 0 = no cap. Default 64; env
   * `BURROW_MAX_CONNECTIONS_PER_CLIENT`. Connections that have not authenticated yet have a
   * smaller budget of their own (src/server/http/limits.ts).
   */
  maxConnectionsPerClient?: number;
  /**
   * Instances kept started ahead of demand, per type (src/server/instances/pool.ts): a number means that
   * many `browser` instances. They count against `maxInstances`. Default none; env
   * `BURROW_WARM_POOL` (`2`, or `browser=2,ubuntu=1`).
   */
  warmPool?: number | WarmPoolSizes;
  /**
   * Sandboxes made ahead of cold starts (src/server/sandbox/stock.ts): namespaces, cgroup and
   * disk ready, no browser; they do not count against `maxInstances`. 0 builds each at its
   * start. Default 2; env `BURROW_SANDBOX_STOCK`.
   */
  sandboxStock?: number;
  /**
   * File holding the key that encrypts auth states at rest (src/server/auth-states/secret-key.ts). Default
   * env `BURROW_SECRET_KEY`, else `BURROW_SECRET_KEY_FILE`, else `<dataDir>/secret-key`
   * (generated once, mode 0600).
   */
  secretKeyFile?: string;
  /** Files holding older keys, read only: their states are re-encrypted at start (rotation). */
  oldSecretKeyFiles?: string[];
  /**
   * Seconds an instance's downloads and recordings stay fetchable after it stopped (src/server/
   * artifacts.ts); 0 drops them with the instance. Default 3600; env
   * `BURROW_ARTIFACT_RETENTION_SECONDS`.
   */
  artifactRetentionSeconds?: number;
  /** Bytes the kept artifacts of all instances may take together. Default 16 GiB; env `BURROW_ARTIFACT_RETAIN_MAX_BYTES`. */
  artifactRetainMaxBytes?: number;
  /**
   * Downloads one instance lists and keeps; later ones stay in its home only (logged). Default
   * 1000; env `BURROW_ARTIFACT_MAX_DOWNLOADS`.
   */
  artifactMaxDownloads?: number;
  /** Seconds without a request after which an MCP session holding instances ends. Default 1800; env `BURROW_MCP_IDLE_SECONDS`. */
  mcpIdleSeconds?: number;
  /** MCP sessions open at once; past it 429. Default 64; env `BURROW_MCP_MAX_SESSIONS`. */
  mcpMaxSessions?: number;
  /** MCP sessions one project's keys may hold at once (cluster mode), under `mcpMaxSessions`; past it 429. Default 16; env `BURROW_MCP_MAX_SESSIONS_PER_PROJECT`. */
  mcpMaxSessionsPerProject?: number;
  /** Where instance disks and generated `/etc`s live. Default env `BURROW_SANDBOX_ROOT`, else `/var/lib/burrow/sandboxes`. */
  sandboxRoot?: string;
  /** bubblewrap binary, when it exists. Default env `BURROW_BWRAP`, else `/usr/bin/bwrap` or `/bin/bwrap`. */
  bwrapPath?: string;
  /** Cluster mode: state in PostgreSQL shared with other nodes (src/server/cluster/). Default none. */
  cluster?: ClusterOptions;
}

/** A node of a cluster (src/server/cluster/). */
export interface ClusterOptions {
  /** `postgres://…` of the cluster's database. Env `BURROW_DATABASE_URL`. */
  databaseUrl: string;
  /** This node's name, the same across its restarts. Default env `BURROW_NODE_NAME`, else the host name. */
  nodeName?: string;
  /** Where the other nodes reach this one. Default env `BURROW_NODE_URL`, else the URL it listens on. */
  nodeUrl?: string;
  /** Seconds a node's lease lasts without renewal. Default 15; env `BURROW_LEASE_SECONDS`. */
  leaseSeconds?: number;
  /**
   * Live instances the whole cluster runs at most (past it starts answer 429 with a computed
   * Retry-After). Default none: each node's `maxInstances` only. Env `BURROW_CLUSTER_MAX_INSTANCES`.
   */
  maxInstances?: number;
  /**
   * Seconds a draining node (SIGTERM, `burrow drain`) lets its instances run on before it stops
   * them (`node_drained`). Default 300; env `BURROW_DRAIN_SECONDS`.
   */
  drainSeconds?: number;
}

/** The keys of the auth-state keyring that come from the environment (auth-states/secret-key.ts). */
export interface SecretKeyEnv {
  BURROW_SECRET_KEY?: string;
  BURROW_SECRET_KEY_FILE?: string;
  BURROW_OLD_SECRET_KEY?: string;
  BURROW_OLD_SECRET_KEY_FILE?: string;
}

/** Every setting after precedence, checks and defaults. Frozen, nested objects included. */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  readonly apiKey: string;
  /** No key was given (option or `BURROW_API_KEY`): `apiKey` is a random one. */
  readonly apiKeyGenerated: boolean;
  readonly dataDir: string;
  /** Undefined: the URL the server listens on. */
  readonly publicUrl: string | undefined;
  readonly logLevel: LogLevel;
  readonly maxInstances: number;
  readonly maxUploadBytes: number;
  readonly maxExtensionBytes: number;
  readonly maxProfileBytes: number;
  readonly maxProfileBytesReadBack: number;
  /** Caps on what is kept for projects (count, bytes): per project, and for all together. */
  readonly storeCaps: Readonly<StoreCaps>;
  /** Undefined: the HTTP layer's own default (http/limits.ts). */
  readonly maxConnectionsPerClient: number | undefined;
  readonly warmPool: Readonly<WarmPoolSizes>;
  readonly sandboxStock: number;
  /** The programs instances are made of. */
  readonly programs: ProgramPaths;
  readonly sandbox: {
    readonly root: string;
    /** Undefined: the first of the usual places that exists (sandbox/support.ts). */
    readonly bwrapPath: string | undefined;
    readonly isolation: Readonly<IsolationOptions>;
  };
  readonly artifacts: {
    readonly retentionMs: number;
    readonly maxRetainedBytes: number;
    readonly maxDownloads: number;
  };
  readonly mcp: {
    readonly idleMs: number;
    readonly maxSessions: number;
    readonly maxSessionsPerProject: number;
  };
  readonly secretKeys: {
    readonly secretKeyFile: string | undefined;
    readonly oldSecretKeyFiles: readonly string[] | undefined;
    /** The keyring's variables, read here once; secret-key.ts applies its precedence to them. */
    readonly env: Readonly<SecretKeyEnv>;
  };
  /** Undefined: a single node with no database. */
  readonly cluster:
    | {
        readonly databaseUrl: string;
        readonly nodeName: string;
        readonly nodeUrl: string | undefined;
        readonly leaseMs: number;
        readonly maxInstances: number | undefined;
        readonly drainMs: number;
      }
    | undefined;
}

/** Programs of instances (host/requirements.ts checks them, the runtimes start them). */
export interface ProgramPaths {
  readonly chromium: string;
  /** Added to every Chromium's command line after burrow's own. */
  readonly chromiumFlags: readonly string[];
  readonly xvfb: string;
  readonly x11vnc: string;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

// ---------------------------------------------------------------------------------------------
// The defaults

export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 8787;
export const DEFAULT_LOG_LEVEL: LogLevel = 'warn';
export const DEFAULT_MAX_INSTANCES = 8;
export const DEFAULT_PROGRAMS: ProgramPaths = Object.freeze({
  chromium: '/usr/lib/chromium/chromium',
  chromiumFlags: Object.freeze([]) as readonly string[],
  xvfb: '/usr/bin/Xvfb',
  x11vnc: '/usr/bin/x11vnc',
});
export const DEFAULT_SANDBOX_ROOT = '/var/lib/burrow/sandboxes';
export const DEFAULT_ARTIFACT_RETENTION_SECONDS = 3600;
export const DEFAULT_ARTIFACT_RETAIN_MAX_BYTES = 16 * 2 ** 30;
export const DEFAULT_ARTIFACT_MAX_DOWNLOADS = 1000;
export const DEFAULT_MCP_IDLE_SECONDS = 30 * 60;
export const DEFAULT_MCP_MAX_SESSIONS = 64;
/** A quarter of the node's: four projects at their cap still leave the admin room. */
export const DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT = 16;
/** Sandboxes made ahead: a burst of two cold starts builds none. */
export const DEFAULT_SANDBOX_STOCK = 2;
export const DEFAULT_MAX_UPLOAD_BYTES = 100 * 2 ** 20;
export const DEFAULT_MAX_EXTENSION_BYTES = 50 * 2 ** 20;
export const DEFAULT_MAX_PROFILE_BYTES = 200 * 2 ** 20;
/** Above one profile's read-back bound (4 × `DEFAULT_MAX_PROFILE_BYTES`): the largest waits for none. */
export const DEFAULT_MAX_PROFILE_BYTES_READ_BACK = 2 ** 30;

/** The caps on kept auth states, profiles and extensions (a single server is one project). */
export interface StoreCaps {
  /** `stateBytes`: one state as captured from a browser (its JSON), whatever room is left. */
  authStates: { count: number; bytes: number; totalBytes: number; stateBytes: number };
  profiles: { count: number; bytes: number; totalBytes: number };
  extensions: { count: number; bytes: number };
}
export const DEFAULT_STORE_CAPS: StoreCaps = {
  authStates: { count: 1000, bytes: 64 * 2 ** 20, totalBytes: 2 ** 30, stateBytes: 8 * 2 ** 20 },
  profiles: { count: 50, bytes: 2 * 2 ** 30, totalBytes: 20 * 2 ** 30 },
  extensions: { count: 100, bytes: 2 * 2 ** 30 },
};
/** Authenticated connections per client address (http/limits.ts). */
export const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 64;
export const DEFAULT_LEASE_SECONDS = 15;
export const DEFAULT_DRAIN_SECONDS = 300;

/**
 * Limits of one instance, for a 24 GiB, 2-core machine: 50 idle browser instances fit (about 200
 * MiB each), and one busy instance cannot take the machine: 2 GiB of memory, 1024 processes, 4
 * GiB of disk (sparse: only what is written takes space), and CPU time of all cores but half of
 * one, so a spinning instance always leaves the server and the others something. (A cap of one
 * core on two doubled Chromium's start-up, which runs on both; instances that compete share by
 * equal weight.)
 */
export const DEFAULT_INSTANCE_LIMITS: Readonly<{
  memoryBytes: number;
  pids: number;
  cpus: number;
  diskBytes: number;
}> = Object.freeze({
  memoryBytes: 2 * 2 ** 30,
  pids: 1024,
  cpus: Math.max(1, availableParallelism() - 0.5),
  diskBytes: 4 * 2 ** 30,
});

/** A bad setting: the message names where the value came from and what a right one looks like. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

// ---------------------------------------------------------------------------------------------
// The schema of the options

const nonEmpty = z.string().min(1);
/** `10.0.0.0/8`, `fd00::/8`, or a bare address (all of its bits). */
export const isCidr = (c: string): boolean => {
  const [address = '', prefix, ...rest] = c.split('/');
  const max = [0, 0, 0, 0, 32, 0, 128][isIP(address)]!;
  return (
    max > 0 &&
    rest.length === 0 &&
    (prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= max))
  );
};
const count = (min: number) => z.int().min(min).max(Number.MAX_SAFE_INTEGER);
const poolSizes = z.strictObject(
  Object.fromEntries(INSTANCE_TYPES.map((t) => [t, count(0).optional()])) as Record<
    RunnableInstanceType,
    z.ZodOptional<ReturnType<typeof count>>
  >,
);

const Isolation = z.strictObject({
  allowHostLoopback: z.boolean().optional(),
  allowHostPorts: z.array(z.int().min(1).max(65535)).optional(),
  allowNetworks: z.array(z.string().refine(isCidr, 'must be a CIDR such as 10.0.0.0/8')).optional(),
  insecureNoIsolation: z.boolean().optional(),
  allowUnlimited: z.boolean().optional(),
  disable: z.boolean().optional(),
  memoryBytes: count(1).optional(),
  pids: count(1).optional(),
  cpus: z.number().min(0.01).optional(),
  diskBytes: count(1).optional(),
});

const Cluster = z.strictObject({
  databaseUrl: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL'),
  nodeName: nonEmpty.optional(),
  nodeUrl: z.url({ protocol: /^https?$/ }).optional(),
  leaseSeconds: count(1).optional(),
  maxInstances: count(1).optional(),
  drainSeconds: count(0).optional(),
});

export const Options = z.strictObject({
  host: nonEmpty.optional(),
  port: z.int().min(0).max(65535).optional(),
  apiKey: z.string().optional(), // empty: not given (checked for length after precedence)
  dataDir: nonEmpty.optional(),
  maxInstances: count(1).optional(),
  maxUploadBytes: count(1).optional(),
  maxExtensionBytes: count(1).optional(),
  maxProfileBytes: count(1).optional(),
  maxProfileBytesReadBack: count(1).optional(),
  maxAuthStatesPerProject: count(1).optional(),
  maxAuthStateBytes: count(1).optional(),
  maxAuthStateBytesPerProject: count(1).optional(),
  maxAuthStateBytesTotal: count(1).optional(),
  maxProfilesPerProject: count(1).optional(),
  maxProfileBytesPerProject: count(1).optional(),
  maxProfileBytesTotal: count(1).optional(),
  maxExtensions: count(1).optional(),
  maxExtensionBytesTotal: count(1).optional(),
  chromiumPath: nonEmpty.optional(),
  chromiumFlags: z.array(nonEmpty).optional(),
  xvfbPath: nonEmpty.optional(),
  x11vncPath: nonEmpty.optional(),
  publicUrl: z.url({ protocol: /^https?$/ }).optional(),
  logLevel: z.enum(LOG_LEVELS).optional(),
  logDestination: z
    .custom<{ write(line: string): void }>(
      (v) => typeof (v as { write?: unknown } | null)?.write === 'function',
      'must be an object with a write(line) method',
    )
    .optional(),
  isolation: Isolation.optional(),
  maxConnectionsPerClient: count(0).optional(),
  warmPool: z.union([count(0), poolSizes]).optional(),
  sandboxStock: count(0).optional(),
  secretKeyFile: nonEmpty.optional(),
  oldSecretKeyFiles: z.array(nonEmpty).optional(),
  artifactRetentionSeconds: count(0).optional(),
  artifactRetainMaxBytes: count(0).optional(),
  artifactMaxDownloads: count(0).optional(),
  mcpIdleSeconds: count(1).optional(),
  mcpMaxSessions: count(1).optional(),
  mcpMaxSessionsPerProject: count(1).optional(),
  sandboxRoot: nonEmpty.optional(),
  bwrapPath: nonEmpty.optional(),
  cluster: Cluster.optional(),
});

// Keeps the documented interface and the schema in step, key for key.
type Keys<T> = keyof { [K in keyof T]-?: unknown };
const sameKeys: [Keys<ServerOptions>] extends [Keys<z.input<typeof Options>>]
  ? [Keys<z.input<typeof Options>>] extends [Keys<ServerOptions>]
    ? true
    : false
  : false = true;
void sameKeys;

/** The option names of `ServerOptions` (the documentation test walks them). */
export const OPTION_KEYS: readonly string[] = Object.keys(Options.shape);
export const ISOLATION_KEYS: readonly string[] = Object.keys(Isolation.shape);
export const CLUSTER_KEYS: readonly string[] = Object.keys(Cluster.shape);
