/**
 * The server's settings in one place: `resolveServerConfig` turns the options `startServer` was
 * given (which `burrow serve` fills from its flags) and the environment into one checked, frozen
 * `ServerConfig`. The composition root (index.ts) builds it once and hands each room the part it
 * needs; no room reads `process.env` for a setting of its own.
 *
 * Precedence, for every setting: the option (or flag), then its environment variable, then the
 * default. A bad value, wherever it came from, is an error naming its source, saying what is
 * wrong with it and what a right one looks like; nothing bad is quietly replaced by a default.
 *
 * `SETTINGS` describes every setting (option, variable, flag, default, meaning);
 * docs/configuration.md is its table, and a unit test keeps the two, the schema and `burrow
 * serve`'s flags in step.
 */
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

/** Instances kept started per type (instances/pool.ts). */
export type WarmPoolSizes = Partial<Record<'browser' | 'ubuntu', number>>;

export interface IsolationOptions {
  /** Instances' browsers may reach every host loopback port but burrow's own. Default false. */
  allowHostLoopback?: boolean;
  /** Host loopback ports instances' browsers may reach. Default none. */
  allowHostPorts?: number[];
  /** Start instances even when this machine cannot isolate them (they then run unisolated). */
  insecureNoIsolation?: boolean;
  /** Run instances unisolated even where isolation works (benchmarks of its cost; tests). */
  disable?: boolean;
  /** Memory limit per instance in bytes. Default 2 GiB. */
  memoryBytes?: number;
  /** Processes and threads per instance. Default 1024. */
  pids?: number;
  /** CPU time per instance, in cores. Default 1. */
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
  /** Saved auth states of one project (a single server: of the server); past it a save answers 507. Default 1000; env `BURROW_MAX_AUTH_STATES_PER_PROJECT`. */
  maxAuthStatesPerProject?: number;
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
  readonly artifacts: { readonly retentionMs: number; readonly maxRetainedBytes: number };
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

export const DEFAULT_PROGRAMS: ProgramPaths = Object.freeze({
  chromium: '/usr/lib/chromium/chromium',
  chromiumFlags: Object.freeze([]) as readonly string[],
  xvfb: '/usr/bin/Xvfb',
  x11vnc: '/usr/bin/x11vnc',
});
export const DEFAULT_SANDBOX_ROOT = '/var/lib/burrow/sandboxes';
export const DEFAULT_ARTIFACT_RETENTION_SECONDS = 3600;
export const DEFAULT_ARTIFACT_RETAIN_MAX_BYTES = 16 * 2 ** 30;
export const DEFAULT_MCP_IDLE_SECONDS = 30 * 60;
export const DEFAULT_MCP_MAX_SESSIONS = 64;
/** A quarter of the node's: four projects at their cap still leave the admin room. */
export const DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT = 16;
/** Sandboxes made ahead: a burst of two cold starts builds none. */
export const DEFAULT_SANDBOX_STOCK = 2;
const DEFAULT_MAX_UPLOAD_BYTES = 100 * 2 ** 20;
export const DEFAULT_MAX_EXTENSION_BYTES = 50 * 2 ** 20;
export const DEFAULT_MAX_PROFILE_BYTES = 200 * 2 ** 20;

/** The caps on kept auth states, profiles and extensions (a single server is one project). */
export interface StoreCaps {
  authStates: { count: number; bytes: number; totalBytes: number };
  profiles: { count: number; bytes: number; totalBytes: number };
  extensions: { count: number; bytes: number };
}
export const DEFAULT_STORE_CAPS: StoreCaps = {
  authStates: { count: 1000, bytes: 64 * 2 ** 20, totalBytes: 2 ** 30 },
  profiles: { count: 50, bytes: 2 * 2 ** 30, totalBytes: 20 * 2 ** 30 },
  extensions: { count: 100, bytes: 2 * 2 ** 30 },
};

/** A bad setting: the message names where the value came from and what a right one looks like. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

// ---------------------------------------------------------------------------------------------
// Text (flags and variables) to values

const SIZE = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$/i;
const UNITS: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };

const bad = (source: string, expected: string, text: string) =>
  new ConfigError(`${source} must be ${expected}, not "${text}"`);

/** `text` as an integer in [min, max]; `source` names the flag or variable in the error. */
export function parseInteger(
  source: string,
  text: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `from ${min} to ${max}`;
    throw bad(source, `an integer ${range}`, text);
  }
  return n;
}

/** `2g` → 2147483648: a byte count with an optional binary k/m/g/t suffix. */
export function parseSize(source: string, text: string): number {
  const m = SIZE.exec(text.trim());
  const bytes = m ? Math.floor(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!) : NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1) {
    throw bad(source, 'a size such as 512m or 2g', text);
  }
  return bytes;
}

/** A number of cores, at least 0.01. */
export function parseCpus(source: string, text: string): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < 0.01) {
    throw bad(source, 'a number of cores of at least 0.01', text);
  }
  return n;
}

/** One of pino's levels. */
export function parseLogLevel(source: string, text: string): LogLevel {
  if ((LOG_LEVELS as readonly string[]).includes(text)) return text as LogLevel;
  throw bad(source, `one of ${LOG_LEVELS.join(', ')}`, text);
}

const WARM_POOL_SHAPE =
  'a number of browser instances (e.g. 2) or sizes per type (e.g. browser=2,ubuntu=1)';

/** `2` → two browser instances; `browser=2,ubuntu=1` → both. Throws on anything else. */
export function parseWarmPool(text: string, source = 'the warm pool'): WarmPoolSizes {
  const t = text.trim();
  if (/^\d+$/.test(t)) return { browser: Number(t) };
  const sizes: WarmPoolSizes = {};
  for (const part of t.split(',')) {
    const m = /^\s*(browser|ubuntu)\s*=\s*(\d+)\s*$/.exec(part);
    if (!m) {
      const what = /^\s*(\w+)\s*=/.exec(part);
      const why =
        what && what[1] !== 'browser' && what[1] !== 'ubuntu'
          ? `"${what[1]}" is not an instance type (browser, ubuntu)`
          : `"${part.trim()}" is not TYPE=COUNT with a whole number`;
      throw new ConfigError(`${source} must be ${WARM_POOL_SHAPE}, not "${text}": ${why}`);
    }
    sizes[m[1] as 'browser' | 'ubuntu'] = Number(m[2]);
  }
  return sizes;
}

// ---------------------------------------------------------------------------------------------
// The schema of the options

const nonEmpty = z.string().min(1);
const count = (min: number) => z.int().min(min).max(Number.MAX_SAFE_INTEGER);
const poolSizes = z.strictObject({ browser: count(0).optional(), ubuntu: count(0).optional() });

const Isolation = z.strictObject({
  allowHostLoopback: z.boolean().optional(),
  allowHostPorts: z.array(z.int().min(1).max(65535)).optional(),
  insecureNoIsolation: z.boolean().optional(),
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

const Options = z.strictObject({
  host: nonEmpty.optional(),
  port: z.int().min(0).max(65535).optional(),
  apiKey: z.string().optional(), // empty: not given (checked for length after precedence)
  dataDir: nonEmpty.optional(),
  maxInstances: count(1).optional(),
  maxUploadBytes: count(1).optional(),
  maxExtensionBytes: count(1).optional(),
  maxProfileBytes: count(1).optional(),
  maxAuthStatesPerProject: count(1).optional(),
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

// ---------------------------------------------------------------------------------------------
// The table of settings

export interface SettingDoc {
  /** The `ServerOptions` field (`isolation.x` for the isolation ones); `-` when there is none. */
  readonly option: string;
  readonly env?: string;
  /** `burrow serve`'s flag(s), without values. */
  readonly flags?: readonly string[];
  readonly default: string;
  readonly meaning: string;
}

/** Every setting of the server, in the order docs/configuration.md lists them. */
export const SETTINGS: readonly SettingDoc[] = [
  {
    option: 'host',
    env: 'BURROW_HOST',
    flags: ['--host'],
    default: '`127.0.0.1`',
    meaning: 'interface to listen on (`0.0.0.0` or `::` for all)',
  },
  {
    option: 'port',
    env: 'BURROW_PORT',
    flags: ['--port'],
    default: '`8787`',
    meaning: 'TCP port; `0` picks a free one',
  },
  {
    option: 'apiKey',
    env: 'BURROW_API_KEY',
    flags: ['--api-key'],
    default: 'random, printed once by `serve`',
    meaning: 'the key clients send in `x-api-key` (at least 8 characters)',
  },
  {
    option: '-',
    env: 'BURROW_API_KEY_FILE',
    flags: ['--api-key-file'],
    default: 'none',
    meaning:
      '`serve` only: a file holding the key alone (not together with the key itself on the same level)',
  },
  {
    option: 'dataDir',
    env: 'BURROW_DATA_DIR',
    flags: ['--data-dir'],
    default: '`$XDG_DATA_HOME/burrow`, else `~/.local/share/burrow`',
    meaning: 'saved auth states, the secret key and the instance directories',
  },
  {
    option: 'maxInstances',
    env: 'BURROW_MAX_INSTANCES',
    flags: ['--max-instances'],
    default: '`8`',
    meaning:
      'live instances at once; past it `start` answers 429 with a `Retry-After` computed from its instances’ deadlines and recent ends (as a full cluster’s)',
  },
  {
    option: 'maxUploadBytes',
    env: 'BURROW_MAX_UPLOAD_BYTES',
    default: '100 MiB',
    meaning: 'largest upload in bytes; past it 413',
  },
  {
    option: 'maxExtensionBytes',
    env: 'BURROW_MAX_EXTENSION_BYTES',
    default: '50 MiB',
    meaning: 'largest browser extension (its zip, and unpacked) in bytes; past it 413',
  },
  {
    option: 'maxProfileBytes',
    env: 'BURROW_MAX_PROFILE_BYTES',
    default: '200 MiB',
    meaning:
      'largest persistent browser profile (sealed) in bytes; a bigger one is not saved (the old version stays)',
  },
  {
    option: 'maxAuthStatesPerProject',
    env: 'BURROW_MAX_AUTH_STATES_PER_PROJECT',
    default: '`1000`',
    meaning:
      'saved auth states of one project (a single server: of the server); past it a save answers 507',
  },
  {
    option: 'maxAuthStateBytesPerProject',
    env: 'BURROW_MAX_AUTH_STATE_BYTES_PER_PROJECT',
    default: '64 MiB',
    meaning: 'bytes of the saved auth states of one project together; past it a save answers 507',
  },
  {
    option: 'maxAuthStateBytesTotal',
    env: 'BURROW_MAX_AUTH_STATE_BYTES_TOTAL',
    default: '1 GiB',
    meaning:
      'bytes of every project’s saved auth states together (the server’s, or the cluster database’s); past it a save answers 507',
  },
  {
    option: 'maxProfilesPerProject',
    env: 'BURROW_MAX_PROFILES_PER_PROJECT',
    default: '`50`',
    meaning: 'saved browser profiles of one project; a start naming a new one past it answers 507',
  },
  {
    option: 'maxProfileBytesPerProject',
    env: 'BURROW_MAX_PROFILE_BYTES_PER_PROJECT',
    default: '2 GiB',
    meaning:
      'sealed bytes of one project’s saved profiles together; a save past it is refused (the old version stays)',
  },
  {
    option: 'maxProfileBytesTotal',
    env: 'BURROW_MAX_PROFILE_BYTES_TOTAL',
    default: '20 GiB',
    meaning:
      'sealed bytes of every project’s saved profiles together; a save past it is refused (the old version stays)',
  },
  {
    option: 'maxExtensions',
    env: 'BURROW_MAX_EXTENSIONS',
    default: '`100`',
    meaning: 'uploaded browser extensions; an upload past it answers 507',
  },
  {
    option: 'maxExtensionBytesTotal',
    env: 'BURROW_MAX_EXTENSION_BYTES_TOTAL',
    default: '2 GiB',
    meaning: 'unpacked bytes of every uploaded extension together; an upload past it answers 507',
  },
  {
    option: 'maxConnectionsPerClient',
    env: 'BURROW_MAX_CONNECTIONS_PER_CLIENT',
    flags: ['--max-connections-per-client'],
    default: '`64`',
    meaning:
      'authenticated connections per client address (`0` = no cap); those not authenticated yet have a budget of 16 of their own',
  },
  {
    option: 'warmPool',
    env: 'BURROW_WARM_POOL',
    flags: ['--warm-pool'],
    default: 'none',
    meaning:
      'instances kept started for `start` to take: `2` (browser) or `browser=2,ubuntu=1`; they count against the instance cap',
  },
  {
    option: 'sandboxStock',
    env: 'BURROW_SANDBOX_STOCK',
    flags: ['--sandbox-stock'],
    default: '`2`',
    meaning:
      "sandboxes (namespaces, cgroup, disk, a fresh Chromium profile's skeleton; no browser) made ahead so that a start the warm pool does not serve builds none; not counted against the instance cap; `0` builds each at its start, and makes no profile skeleton",
  },
  {
    option: 'publicUrl',
    flags: ['--public-url'],
    default: 'the listening URL',
    meaning:
      'base URL put into `cdp_url` and `stream_url`; in a cluster, the one address of every node (a load balancer), given to each node alike',
  },
  {
    option: 'logLevel',
    env: 'BURROW_LOG_LEVEL',
    flags: ['--log-level'],
    default: '`warn`',
    meaning: `pino level: ${LOG_LEVELS.map((l) => `\`${l}\``).join(', ')}`,
  },
  {
    option: 'logDestination',
    default: 'stdout',
    meaning: 'programmatic only: an object whose `write(line)` gets the log lines',
  },
  {
    option: 'chromiumPath',
    env: 'BURROW_CHROMIUM',
    default: `\`${DEFAULT_PROGRAMS.chromium}\``,
    meaning: 'Chromium binary (the real one, not the `/usr/bin` wrapper)',
  },
  {
    option: 'chromiumFlags',
    env: 'BURROW_CHROMIUM_FLAGS',
    default: 'none',
    meaning: "flags added to every Chromium after burrow's own (space-separated in the variable)",
  },
  {
    option: 'xvfbPath',
    env: 'BURROW_XVFB',
    default: `\`${DEFAULT_PROGRAMS.xvfb}\``,
    meaning: 'Xvfb binary of ubuntu instances',
  },
  {
    option: 'x11vncPath',
    env: 'BURROW_X11VNC',
    default: `\`${DEFAULT_PROGRAMS.x11vnc}\``,
    meaning: 'x11vnc binary of the live view of ubuntu instances',
  },
  {
    option: 'bwrapPath',
    env: 'BURROW_BWRAP',
    default: '`/usr/bin/bwrap`, else `/bin/bwrap`',
    meaning: 'bubblewrap binary (used when the file exists)',
  },
  {
    option: 'sandboxRoot',
    env: 'BURROW_SANDBOX_ROOT',
    default: `\`${DEFAULT_SANDBOX_ROOT}\` (a normal user: \`sandboxes\` in the data dir)`,
    meaning: 'instance disks and generated `/etc`s; every instance uid must be able to traverse it',
  },
  {
    option: 'isolation.memoryBytes',
    flags: ['--instance-memory'],
    default: '2 GiB',
    meaning: 'memory limit of each instance (flag: a size such as `2g`)',
  },
  {
    option: 'isolation.pids',
    flags: ['--instance-pids'],
    default: '`1024`',
    meaning: 'processes and threads in each instance',
  },
  {
    option: 'isolation.cpus',
    flags: ['--instance-cpus'],
    default: '`1`',
    meaning: 'CPU time of each instance, in cores (e.g. `1.5`)',
  },
  {
    option: 'isolation.diskBytes',
    flags: ['--instance-disk'],
    default: '4 GiB',
    meaning: 'disk quota of each instance (flag: a size such as `4g`)',
  },
  {
    option: 'isolation.allowHostLoopback',
    flags: ['--allow-host-loopback'],
    default: 'off',
    meaning: "instances may reach every host loopback port but burrow's own",
  },
  {
    option: 'isolation.allowHostPorts',
    flags: ['--allow-host-port'],
    default: 'none',
    meaning: 'host loopback ports instances may reach (flag repeatable)',
  },
  {
    option: 'isolation.insecureNoIsolation',
    flags: ['--insecure-no-isolation'],
    default: 'off',
    meaning: 'start instances even where this machine cannot isolate them (they run unisolated)',
  },
  {
    option: 'isolation.disable',
    default: 'off',
    meaning:
      'programmatic only: run instances unisolated even where isolation works (benchmarks, tests)',
  },
  {
    option: 'secretKeyFile',
    env: 'BURROW_SECRET_KEY_FILE',
    flags: ['--secret-key-file'],
    default: '`<data dir>/secret-key`, generated once',
    meaning: 'file with the key that encrypts saved auth states (32 bytes, hex or base64)',
  },
  {
    option: '-',
    env: 'BURROW_SECRET_KEY',
    default: 'none',
    meaning: 'the key itself (not together with `BURROW_SECRET_KEY_FILE`)',
  },
  {
    option: 'oldSecretKeyFiles',
    env: 'BURROW_OLD_SECRET_KEY_FILE',
    flags: ['--old-secret-key-file'],
    default: 'none',
    meaning:
      'previous keys during a rotation: states they sealed are re-encrypted at start (flag repeatable)',
  },
  {
    option: '-',
    env: 'BURROW_OLD_SECRET_KEY',
    default: 'none',
    meaning: 'previous keys themselves, separated by commas or spaces',
  },
  {
    option: 'artifactRetentionSeconds',
    env: 'BURROW_ARTIFACT_RETENTION_SECONDS',
    flags: ['--artifact-retention'],
    default: `\`${DEFAULT_ARTIFACT_RETENTION_SECONDS}\``,
    meaning:
      'seconds downloads and recordings stay fetchable after their instance stopped (`0` = not kept)',
  },
  {
    option: 'artifactRetainMaxBytes',
    env: 'BURROW_ARTIFACT_RETAIN_MAX_BYTES',
    default: '16 GiB',
    meaning: 'bytes the kept downloads and recordings of all instances may take together',
  },
  {
    option: 'mcpIdleSeconds',
    env: 'BURROW_MCP_IDLE_SECONDS',
    default: `\`${DEFAULT_MCP_IDLE_SECONDS}\``,
    meaning:
      'idle seconds after which an MCP session holding instances ends (one holding none ends after 2 min, or sooner)',
  },
  {
    option: 'mcpMaxSessions',
    env: 'BURROW_MCP_MAX_SESSIONS',
    default: `\`${DEFAULT_MCP_MAX_SESSIONS}\``,
    meaning: 'MCP sessions open at once; past it `initialize` answers 429',
  },
  {
    option: 'mcpMaxSessionsPerProject',
    env: 'BURROW_MCP_MAX_SESSIONS_PER_PROJECT',
    default: `\`${DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT}\``,
    meaning:
      'MCP sessions the keys of one project hold at once (cluster mode), within `mcpMaxSessions`; past it `initialize` answers 429',
  },
  {
    option: 'cluster.databaseUrl',
    env: 'BURROW_DATABASE_URL',
    flags: ['--cluster'],
    default: 'none (one node, no database)',
    meaning:
      'cluster mode: instance rows and auth states live in this PostgreSQL, shared by every node (`postgres://…`); every node needs the same auth-state key (`BURROW_SECRET_KEY_FILE`)',
  },
  {
    option: 'cluster.nodeName',
    env: 'BURROW_NODE_NAME',
    flags: ['--node-name'],
    default: 'the host name',
    meaning:
      'this node’s name in the cluster, the same across its restarts (letters, digits, `.`, `_`, `-`)',
  },
  {
    option: 'cluster.nodeUrl',
    env: 'BURROW_NODE_URL',
    flags: ['--node-url'],
    default: 'the URL the node listens on',
    meaning: 'where the other nodes reach this one',
  },
  {
    option: 'cluster.leaseSeconds',
    env: 'BURROW_LEASE_SECONDS',
    default: '`15`',
    meaning: 'seconds a node’s lease lasts without renewal (renewed every third of it)',
  },
  {
    option: 'cluster.maxInstances',
    env: 'BURROW_CLUSTER_MAX_INSTANCES',
    default: 'none (each node’s `maxInstances`)',
    meaning:
      'live instances of the whole cluster at most; past it `start` answers 429 with a `Retry-After` computed from the load',
  },
  {
    option: 'cluster.drainSeconds',
    env: 'BURROW_DRAIN_SECONDS',
    default: '`300`',
    meaning:
      'seconds a draining node (SIGTERM, `burrow drain`, `POST /v1/node/drain`) lets its instances run on; then they stop with `end_reason: "node_drained"` and it exits; it places the starts it is sent on other nodes from the first moment',
  },
];

/** docs/configuration.md's table, made from `SETTINGS`. */
export function settingsTable(): string {
  const cell = (s: string | undefined) => (s ? s.replace(/\|/g, '\\|') : '');
  const code = (s: string | undefined) => (s ? `\`${s}\`` : '');
  const rows = SETTINGS.map((s) =>
    [
      s.option === '-' ? '' : code(s.option),
      code(s.env),
      (s.flags ?? []).map(code).join(', '),
      cell(s.default),
      cell(s.meaning),
    ].join(' | '),
  );
  return [
    '| option | variable | `serve` flag | default | meaning |',
    '|---|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Resolving

type Env = Readonly<Record<string, string | undefined>>;

/** The data dir without an option: `BURROW_DATA_DIR`, else `$XDG_DATA_HOME/burrow`, else `~/.local/share/burrow`. */
export function defaultDataDir(env: Env = process.env): string {
  if (env.BURROW_DATA_DIR) return env.BURROW_DATA_DIR;
  const base = env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  return join(base, 'burrow');
}

/** The programs' paths the environment names (doctor uses this without a server). */
export function programPaths(env: Env, options: ServerOptions = {}): ProgramPaths {
  const text = (name: string) => env[name] || undefined;
  const flags =
    options.chromiumFlags ?? (env.BURROW_CHROMIUM_FLAGS ?? '').split(/\s+/).filter(Boolean);
  return Object.freeze({
    chromium: options.chromiumPath ?? text('BURROW_CHROMIUM') ?? DEFAULT_PROGRAMS.chromium,
    chromiumFlags: Object.freeze([...flags]),
    xvfb: options.xvfbPath ?? text('BURROW_XVFB') ?? DEFAULT_PROGRAMS.xvfb,
    x11vnc: options.x11vncPath ?? text('BURROW_X11VNC') ?? DEFAULT_PROGRAMS.x11vnc,
  });
}

const issueText = (error: z.ZodError) =>
  error.issues.map((i) => `${i.path.join('.') || '(options)'}: ${i.message}`).join('; ');

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * One `ServerConfig` from `options` (which win) and `env` (default `process.env`). Throws
 * `ConfigError` on a bad value. `apiKey` is generated when neither gives one.
 */
export function resolveServerConfig(
  options: ServerOptions = {},
  env: Env = process.env,
  generateKey: () => string = () => '',
): ServerConfig {
  const parsed = Options.safeParse(options);
  if (!parsed.success) throw new ConfigError(`startServer: ${issueText(parsed.error)}`);
  const o = options; // checked above; the interface's types are the exact ones
  /** The variable's text, or undefined when it is unset or empty. */
  const text = (name: string) =>
    env[name] === undefined || env[name] === '' ? undefined : env[name];
  const int = (name: string, min: number, max?: number) => {
    const t = text(name);
    return t === undefined ? undefined : parseInteger(name, t, min, max);
  };
  const cap = (given: number | undefined, name: string, fallback: number) =>
    given ?? int(name, 1) ?? fallback;
  const levelText = text('BURROW_LOG_LEVEL');
  const logLevel =
    o.logLevel ?? (levelText === undefined ? 'warn' : parseLogLevel('BURROW_LOG_LEVEL', levelText));
  const givenKey = o.apiKey || text('BURROW_API_KEY');
  const apiKey = givenKey ?? generateKey();
  if (apiKey.length < 8) throw new ConfigError('The API key must be at least 8 characters long');
  const poolText = text('BURROW_WARM_POOL');
  const warmPool =
    typeof o.warmPool === 'number'
      ? { browser: o.warmPool }
      : o.warmPool
        ? { ...o.warmPool }
        : poolText === undefined
          ? {}
          : parseWarmPool(poolText, 'BURROW_WARM_POOL');
  const mcpIdle = o.mcpIdleSeconds ?? int('BURROW_MCP_IDLE_SECONDS', 1) ?? DEFAULT_MCP_IDLE_SECONDS;
  const retention =
    o.artifactRetentionSeconds ??
    int('BURROW_ARTIFACT_RETENTION_SECONDS', 0) ??
    DEFAULT_ARTIFACT_RETENTION_SECONDS;
  const secretEnv: SecretKeyEnv = {};
  for (const name of [
    'BURROW_SECRET_KEY',
    'BURROW_SECRET_KEY_FILE',
    'BURROW_OLD_SECRET_KEY',
    'BURROW_OLD_SECRET_KEY_FILE',
  ] as const) {
    const t = text(name);
    if (t !== undefined) secretEnv[name] = t;
  }
  const databaseUrl = o.cluster?.databaseUrl ?? text('BURROW_DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError(
      `BURROW_DATABASE_URL must be a postgres:// URL (postgres://user:password@host:5432/db), not ${JSON.stringify(databaseUrl.replace(/\/\/[^@/]*@/, '//…@'))}`,
    );
  }
  const nodeName = o.cluster?.nodeName ?? text('BURROW_NODE_NAME') ?? hostname();
  const nodeUrl = o.cluster?.nodeUrl ?? text('BURROW_NODE_URL');
  if (nodeUrl !== undefined && !/^https?:\/\/[^/]+/.test(nodeUrl)) {
    throw new ConfigError(`BURROW_NODE_URL must be an http(s) URL, not ${JSON.stringify(nodeUrl)}`);
  }
  const leaseSeconds = o.cluster?.leaseSeconds ?? int('BURROW_LEASE_SECONDS', 1) ?? 15;
  const clusterMax = o.cluster?.maxInstances ?? int('BURROW_CLUSTER_MAX_INSTANCES', 1);
  const drainSeconds = o.cluster?.drainSeconds ?? int('BURROW_DRAIN_SECONDS', 0) ?? 300;
  const config: ServerConfig = {
    host: o.host ?? text('BURROW_HOST') ?? '127.0.0.1',
    port: o.port ?? int('BURROW_PORT', 0, 65535) ?? 8787,
    apiKey,
    apiKeyGenerated: givenKey === undefined,
    dataDir: o.dataDir ?? defaultDataDir(env),
    publicUrl: o.publicUrl,
    logLevel: logLevel as LogLevel, // an option's was checked by the schema
    maxInstances: o.maxInstances ?? int('BURROW_MAX_INSTANCES', 1) ?? 8,
    maxUploadBytes:
      o.maxUploadBytes ?? int('BURROW_MAX_UPLOAD_BYTES', 1) ?? DEFAULT_MAX_UPLOAD_BYTES,
    maxExtensionBytes:
      o.maxExtensionBytes ?? int('BURROW_MAX_EXTENSION_BYTES', 1) ?? DEFAULT_MAX_EXTENSION_BYTES,
    maxProfileBytes:
      o.maxProfileBytes ?? int('BURROW_MAX_PROFILE_BYTES', 1) ?? DEFAULT_MAX_PROFILE_BYTES,
    storeCaps: {
      authStates: {
        count: cap(
          o.maxAuthStatesPerProject,
          'BURROW_MAX_AUTH_STATES_PER_PROJECT',
          DEFAULT_STORE_CAPS.authStates.count,
        ),
        bytes: cap(
          o.maxAuthStateBytesPerProject,
          'BURROW_MAX_AUTH_STATE_BYTES_PER_PROJECT',
          DEFAULT_STORE_CAPS.authStates.bytes,
        ),
        totalBytes: cap(
          o.maxAuthStateBytesTotal,
          'BURROW_MAX_AUTH_STATE_BYTES_TOTAL',
          DEFAULT_STORE_CAPS.authStates.totalBytes,
        ),
      },
      profiles: {
        count: cap(
          o.maxProfilesPerProject,
          'BURROW_MAX_PROFILES_PER_PROJECT',
          DEFAULT_STORE_CAPS.profiles.count,
        ),
        bytes: cap(
          o.maxProfileBytesPerProject,
          'BURROW_MAX_PROFILE_BYTES_PER_PROJECT',
          DEFAULT_STORE_CAPS.profiles.bytes,
        ),
        totalBytes: cap(
          o.maxProfileBytesTotal,
          'BURROW_MAX_PROFILE_BYTES_TOTAL',
          DEFAULT_STORE_CAPS.profiles.totalBytes,
        ),
      },
      extensions: {
        count: cap(o.maxExtensions, 'BURROW_MAX_EXTENSIONS', DEFAULT_STORE_CAPS.extensions.count),
        bytes: cap(
          o.maxExtensionBytesTotal,
          'BURROW_MAX_EXTENSION_BYTES_TOTAL',
          DEFAULT_STORE_CAPS.extensions.bytes,
        ),
      },
    },
    maxConnectionsPerClient:
      o.maxConnectionsPerClient ?? int('BURROW_MAX_CONNECTIONS_PER_CLIENT', 0),
    warmPool,
    sandboxStock: o.sandboxStock ?? int('BURROW_SANDBOX_STOCK', 0) ?? DEFAULT_SANDBOX_STOCK,
    programs: programPaths(env, o),
    sandbox: {
      root: o.sandboxRoot ?? text('BURROW_SANDBOX_ROOT') ?? DEFAULT_SANDBOX_ROOT,
      bwrapPath: o.bwrapPath ?? text('BURROW_BWRAP'),
      // copies: freezing must not reach the caller's objects
      isolation: {
        ...o.isolation,
        ...(o.isolation?.allowHostPorts && { allowHostPorts: [...o.isolation.allowHostPorts] }),
      },
    },
    artifacts: {
      retentionMs: retention * 1000,
      maxRetainedBytes:
        o.artifactRetainMaxBytes ??
        int('BURROW_ARTIFACT_RETAIN_MAX_BYTES', 0) ??
        DEFAULT_ARTIFACT_RETAIN_MAX_BYTES,
    },
    mcp: {
      idleMs: mcpIdle * 1000,
      maxSessions:
        o.mcpMaxSessions ?? int('BURROW_MCP_MAX_SESSIONS', 1) ?? DEFAULT_MCP_MAX_SESSIONS,
      maxSessionsPerProject:
        o.mcpMaxSessionsPerProject ??
        int('BURROW_MCP_MAX_SESSIONS_PER_PROJECT', 1) ??
        DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT,
    },
    secretKeys: {
      secretKeyFile: o.secretKeyFile,
      oldSecretKeyFiles: o.oldSecretKeyFiles && [...o.oldSecretKeyFiles],
      env: secretEnv,
    },
    cluster:
      databaseUrl === undefined
        ? undefined
        : {
            databaseUrl,
            nodeName,
            nodeUrl,
            leaseMs: leaseSeconds * 1000,
            maxInstances: clusterMax,
            drainMs: drainSeconds * 1000,
          },
  };
  return deepFreeze(config);
}
