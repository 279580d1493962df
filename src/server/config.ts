/**
 * The server's settings in one place: `resolveServerConfig` turns the options `startServer` was
 * given (which `burrow serve` fills from its flags) and the environment into one checked, frozen
 * `ServerConfig`. The composition root (index.ts) builds it once and hands each room the part it
 * needs; no room reads `process.env` for a setting of its own. This module is the one that reads
 * the environment (and turns the text of variables and flags into values); what the settings are
 * and their defaults is config-schema.ts, how option, variable and default are put together is
 * config-resolve.ts, and the documented table is config-table.ts. Everything a caller needs of the
 * four is exported here.
 *
 * Precedence, for every setting: the option (or flag), then its environment variable, then the
 * default. A bad value, wherever it came from, is an error naming its source, saying what is
 * wrong with it and what a right one looks like; nothing bad is quietly replaced by a default.
 */
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import { INSTANCE_TYPES, type RunnableInstanceType } from '../api/index.js';
import { resolveSettings, type EnvSettings } from './config-resolve.js';
import {
  ConfigError,
  isCidr,
  DEFAULT_PROGRAMS,
  LOG_LEVELS,
  type LogLevel,
  type ProgramPaths,
  type SecretKeyEnv,
  type ServerConfig,
  type ServerOptions,
  type WarmPoolSizes,
} from './config-schema.js';

export {
  CLUSTER_KEYS,
  ConfigError,
  DEFAULT_ARTIFACT_RETAIN_MAX_BYTES,
  DEFAULT_ARTIFACT_MAX_DOWNLOADS,
  DEFAULT_ARTIFACT_RETENTION_SECONDS,
  DEFAULT_DRAIN_SECONDS,
  DEFAULT_HOST,
  DEFAULT_INSTANCE_LIMITS,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_LOG_LEVEL,
  DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
  DEFAULT_MAX_EXTENSION_BYTES,
  DEFAULT_MAX_INSTANCES,
  DEFAULT_MAX_PROFILE_BYTES,
  DEFAULT_MAX_UPLOAD_BYTES,
  DEFAULT_MCP_IDLE_SECONDS,
  DEFAULT_MCP_MAX_SESSIONS,
  DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT,
  DEFAULT_STORE_CAPS,
  type StoreCaps,
  DEFAULT_PORT,
  DEFAULT_PROGRAMS,
  DEFAULT_SANDBOX_ROOT,
  DEFAULT_SANDBOX_STOCK,
  ISOLATION_KEYS,
  LOG_LEVELS,
  OPTION_KEYS,
  type ClusterOptions,
  type IsolationOptions,
  type LogLevel,
  type ProgramPaths,
  type SecretKeyEnv,
  type ServerConfig,
  type ServerOptions,
  type WarmPoolSizes,
} from './config-schema.js';
export { SETTINGS, settingsTable, type SettingDoc } from './config-table.js';

// ---------------------------------------------------------------------------------------------
// Text (flags and variables) to values

const SIZE = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$/i;
const UNITS: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };

const bad = (source: string, expected: string, text: string) =>
  new ConfigError(`${source} must be ${expected}, not "${text}"`);

/** `text` as a switch: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`. */
export function parseSwitch(source: string, text: string): boolean {
  const t = text.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(t)) return true;
  if (['0', 'false', 'no', 'off'].includes(t)) return false;
  throw bad(source, '1 or 0', text);
}

/** The `BURROW_ALLOW_UNLIMITED` of `env`, undefined where unset (`burrow serve` reads it too). */
export function allowUnlimitedVariable(env: Env): boolean | undefined {
  const text = env.BURROW_ALLOW_UNLIMITED;
  return text === undefined || text === ''
    ? undefined
    : parseSwitch('BURROW_ALLOW_UNLIMITED', text);
}

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
const POOL_PART = new RegExp(`^\\s*(${INSTANCE_TYPES.join('|')})\\s*=\\s*(\\d+)\\s*$`);
const isInstanceType = (name: string): name is RunnableInstanceType =>
  (INSTANCE_TYPES as readonly string[]).includes(name);

/** `2` → two browser instances; `browser=2,ubuntu=1` → both. Throws on anything else. */
export function parseWarmPool(text: string, source = 'the warm pool'): WarmPoolSizes {
  const t = text.trim();
  if (/^\d+$/.test(t)) return { browser: Number(t) };
  const sizes: WarmPoolSizes = {};
  for (const part of t.split(',')) {
    const m = POOL_PART.exec(part);
    if (!m) {
      const what = /^\s*(\w+)\s*=/.exec(part);
      const why =
        what && !isInstanceType(what[1]!)
          ? `"${what[1]}" is not an instance type (${INSTANCE_TYPES.join(', ')})`
          : `"${part.trim()}" is not TYPE=COUNT with a whole number`;
      throw new ConfigError(`${source} must be ${WARM_POOL_SHAPE}, not "${text}": ${why}`);
    }
    sizes[m[1] as RunnableInstanceType] = Number(m[2]);
  }
  return sizes;
}

// ---------------------------------------------------------------------------------------------
// The environment

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

const SECRET_KEY_VARIABLES = [
  'BURROW_SECRET_KEY',
  'BURROW_SECRET_KEY_FILE',
  'BURROW_OLD_SECRET_KEY',
  'BURROW_OLD_SECRET_KEY_FILE',
] as const;

/** What `env` says of each setting, each variable read and checked when it is asked for. */
function readEnvironment(env: Env): EnvSettings {
  /** The variable's text, or undefined when it is unset or empty. */
  const text = (name: string) =>
    env[name] === undefined || env[name] === '' ? undefined : env[name];
  const int = (name: string, min: number, max?: number) => {
    const t = text(name);
    return t === undefined ? undefined : parseInteger(name, t, min, max);
  };
  const parsed = <T>(name: string, parse: (source: string, text: string) => T) => {
    const t = text(name);
    return t === undefined ? undefined : parse(name, t);
  };
  const readers: { [K in keyof EnvSettings]: () => EnvSettings[K] } = {
    host: () => text('BURROW_HOST'),
    port: () => int('BURROW_PORT', 0, 65535),
    apiKey: () => text('BURROW_API_KEY'),
    dataDir: () => defaultDataDir(env),
    logLevel: () => parsed('BURROW_LOG_LEVEL', parseLogLevel),
    maxInstances: () => int('BURROW_MAX_INSTANCES', 1),
    maxUploadBytes: () => int('BURROW_MAX_UPLOAD_BYTES', 1),
    maxExtensionBytes: () => int('BURROW_MAX_EXTENSION_BYTES', 1),
    maxProfileBytes: () => int('BURROW_MAX_PROFILE_BYTES', 1),
    maxProfileBytesReadBack: () => int('BURROW_MAX_PROFILE_BYTES_READ_BACK', 1),
    maxConnectionsPerClient: () => int('BURROW_MAX_CONNECTIONS_PER_CLIENT', 0),
    warmPool: () => parsed('BURROW_WARM_POOL', (name, t) => parseWarmPool(t, name)),
    sandboxStock: () => int('BURROW_SANDBOX_STOCK', 0),
    programs: () => (options) => programPaths(env, options),
    sandboxRoot: () => text('BURROW_SANDBOX_ROOT'),
    bwrapPath: () => text('BURROW_BWRAP'),
    artifactRetentionSeconds: () => int('BURROW_ARTIFACT_RETENTION_SECONDS', 0),
    artifactRetainMaxBytes: () => int('BURROW_ARTIFACT_RETAIN_MAX_BYTES', 0),
    artifactMaxDownloads: () => int('BURROW_ARTIFACT_MAX_DOWNLOADS', 0),
    mcpIdleSeconds: () => int('BURROW_MCP_IDLE_SECONDS', 1),
    mcpMaxSessions: () => int('BURROW_MCP_MAX_SESSIONS', 1),
    mcpMaxSessionsPerProject: () => int('BURROW_MCP_MAX_SESSIONS_PER_PROJECT', 1),
    maxAuthStatesPerProject: () => int('BURROW_MAX_AUTH_STATES_PER_PROJECT', 1),
    maxAuthStateBytes: () => int('BURROW_MAX_AUTH_STATE_BYTES', 1),
    maxAuthStateBytesPerProject: () => int('BURROW_MAX_AUTH_STATE_BYTES_PER_PROJECT', 1),
    maxAuthStateBytesTotal: () => int('BURROW_MAX_AUTH_STATE_BYTES_TOTAL', 1),
    maxProfilesPerProject: () => int('BURROW_MAX_PROFILES_PER_PROJECT', 1),
    maxProfileBytesPerProject: () => int('BURROW_MAX_PROFILE_BYTES_PER_PROJECT', 1),
    maxProfileBytesTotal: () => int('BURROW_MAX_PROFILE_BYTES_TOTAL', 1),
    maxExtensions: () => int('BURROW_MAX_EXTENSIONS', 1),
    maxExtensionBytesTotal: () => int('BURROW_MAX_EXTENSION_BYTES_TOTAL', 1),
    secretKeys: () => {
      const keys: SecretKeyEnv = {};
      for (const name of SECRET_KEY_VARIABLES) {
        const t = text(name);
        if (t !== undefined) keys[name] = t;
      }
      return keys;
    },
    databaseUrl: () => {
      const url = text('BURROW_DATABASE_URL');
      if (url !== undefined && !/^postgres(ql)?:\/\//.test(url)) {
        throw new ConfigError(
          `BURROW_DATABASE_URL must be a postgres:// URL (postgres://user:password@host:5432/db), not ${JSON.stringify(url.replace(/\/\/[^@/]*@/, '//…@'))}`,
        );
      }
      return url;
    },
    nodeName: () => text('BURROW_NODE_NAME') ?? hostname(),
    nodeUrl: () => {
      const url = text('BURROW_NODE_URL');
      if (url !== undefined && !/^https?:\/\/[^/]+/.test(url)) {
        throw new ConfigError(`BURROW_NODE_URL must be an http(s) URL, not ${JSON.stringify(url)}`);
      }
      return url;
    },
    leaseSeconds: () => int('BURROW_LEASE_SECONDS', 1),
    clusterMaxInstances: () => int('BURROW_CLUSTER_MAX_INSTANCES', 1),
    drainSeconds: () => int('BURROW_DRAIN_SECONDS', 0),
    allowUnlimited: () => allowUnlimitedVariable(env),
    allowNetworks: () => {
      const networks = text('BURROW_ALLOW_NETWORK')
        ?.split(',')
        .map((c) => c.trim());
      const bad = networks?.find((c) => !isCidr(c));
      if (bad !== undefined) {
        throw new ConfigError(`BURROW_ALLOW_NETWORK: ${bad} is no CIDR such as 10.0.0.0/8`);
      }
      return networks;
    },
  };
  // each a getter: a variable is read only when no option gave its setting
  const getters = Object.entries(readers).map(([key, read]) => [key, { get: read }] as const);
  return Object.defineProperties({}, Object.fromEntries(getters)) as EnvSettings;
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
  return resolveSettings(options, readEnvironment(env), generateKey);
}
