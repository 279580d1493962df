/**
 * Putting the settings together: for each, the option (or flag) if given, else what the
 * environment says (config.ts reads it, `EnvSettings`), else the default (config-schema.ts); then
 * the checks that need the result (the key's length), and a frozen `ServerConfig`. Nothing here
 * reads the environment: a variable is read, and checked, only when no option gave its setting.
 */
import type { z } from 'zod';
import {
  ConfigError,
  DEFAULT_ARTIFACT_RETAIN_MAX_BYTES,
  DEFAULT_ARTIFACT_MAX_DOWNLOADS,
  DEFAULT_ARTIFACT_RETENTION_SECONDS,
  DEFAULT_DRAIN_SECONDS,
  DEFAULT_HOST,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_LOG_LEVEL,
  DEFAULT_MAX_EXTENSION_BYTES,
  DEFAULT_MAX_INSTANCES,
  DEFAULT_MAX_PROFILE_BYTES,
  DEFAULT_MAX_PROFILE_BYTES_READ_BACK,
  DEFAULT_MAX_UPLOAD_BYTES,
  DEFAULT_MCP_IDLE_SECONDS,
  DEFAULT_MCP_MAX_SESSIONS,
  DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT,
  DEFAULT_STORE_CAPS,
  DEFAULT_PORT,
  DEFAULT_SANDBOX_ROOT,
  DEFAULT_SANDBOX_STOCK,
  Options,
  type LogLevel,
  type ProgramPaths,
  type SecretKeyEnv,
  type ServerConfig,
  type ServerOptions,
  type WarmPoolSizes,
} from './config-schema.js';

/**
 * What the environment says of each setting; undefined where its variable is unset or empty.
 * Each is read (and a bad value thrown as a `ConfigError` naming its variable) when asked for.
 */
export interface EnvSettings {
  readonly host: string | undefined;
  readonly port: number | undefined;
  readonly apiKey: string | undefined;
  /** Never undefined: without `BURROW_DATA_DIR`, the XDG place. */
  readonly dataDir: string;
  readonly logLevel: LogLevel | undefined;
  readonly maxInstances: number | undefined;
  readonly maxUploadBytes: number | undefined;
  readonly maxExtensionBytes: number | undefined;
  readonly maxProfileBytes: number | undefined;
  readonly maxProfileBytesReadBack: number | undefined;
  readonly maxConnectionsPerClient: number | undefined;
  readonly warmPool: WarmPoolSizes | undefined;
  readonly sandboxStock: number | undefined;
  /** The programs, the options' paths winning over the variables'. */
  programs(options: ServerOptions): ProgramPaths;
  readonly sandboxRoot: string | undefined;
  readonly bwrapPath: string | undefined;
  readonly artifactRetentionSeconds: number | undefined;
  readonly artifactRetainMaxBytes: number | undefined;
  readonly artifactMaxDownloads: number | undefined;
  readonly mcpIdleSeconds: number | undefined;
  readonly mcpMaxSessions: number | undefined;
  /** The keyring's variables, as they are: secret-key.ts applies their precedence. */
  readonly secretKeys: SecretKeyEnv;
  readonly databaseUrl: string | undefined;
  /** Never undefined: without `BURROW_NODE_NAME`, the host name. */
  readonly nodeName: string;
  readonly nodeUrl: string | undefined;
  readonly leaseSeconds: number | undefined;
  readonly clusterMaxInstances: number | undefined;
  readonly drainSeconds: number | undefined;
  readonly mcpMaxSessionsPerProject: number | undefined;
  readonly maxAuthStatesPerProject: number | undefined;
  readonly maxAuthStateBytes: number | undefined;
  readonly maxAuthStateBytesPerProject: number | undefined;
  readonly maxAuthStateBytesTotal: number | undefined;
  readonly maxProfilesPerProject: number | undefined;
  readonly maxProfileBytesPerProject: number | undefined;
  readonly maxProfileBytesTotal: number | undefined;
  readonly maxExtensions: number | undefined;
  readonly maxExtensionBytesTotal: number | undefined;
  /** `BURROW_ALLOW_NETWORK`, split at its commas and checked. */
  readonly allowNetworks: string[] | undefined;
  /** `BURROW_ALLOW_UNLIMITED` (`1` or `0`). */
  readonly allowUnlimited: boolean | undefined;
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
 * One `ServerConfig` from `options` (which win), `env` and the defaults. Throws `ConfigError` on
 * a bad value. `apiKey` is `generateKey()` when neither gives one.
 */
export function resolveSettings(
  options: ServerOptions,
  env: EnvSettings,
  generateKey: () => string,
): ServerConfig {
  const parsed = Options.safeParse(options);
  if (!parsed.success) throw new ConfigError(`startServer: ${issueText(parsed.error)}`);
  const o = options; // checked above; the interface's types are the exact ones
  const logLevel = o.logLevel ?? env.logLevel ?? DEFAULT_LOG_LEVEL;
  const givenKey = o.apiKey || env.apiKey;
  const apiKey = givenKey ?? generateKey();
  if (apiKey.length < 8) throw new ConfigError('The API key must be at least 8 characters long');
  const warmPool =
    typeof o.warmPool === 'number'
      ? { browser: o.warmPool }
      : o.warmPool
        ? { ...o.warmPool }
        : (env.warmPool ?? {});
  const mcpIdle = o.mcpIdleSeconds ?? env.mcpIdleSeconds ?? DEFAULT_MCP_IDLE_SECONDS;
  const retention =
    o.artifactRetentionSeconds ??
    env.artifactRetentionSeconds ??
    DEFAULT_ARTIFACT_RETENTION_SECONDS;
  const secretEnv = env.secretKeys;
  const databaseUrl = o.cluster?.databaseUrl ?? env.databaseUrl;
  const nodeName = o.cluster?.nodeName ?? env.nodeName;
  const nodeUrl = o.cluster?.nodeUrl ?? env.nodeUrl;
  const leaseSeconds = o.cluster?.leaseSeconds ?? env.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  const clusterMax = o.cluster?.maxInstances ?? env.clusterMaxInstances;
  const drainSeconds = o.cluster?.drainSeconds ?? env.drainSeconds ?? DEFAULT_DRAIN_SECONDS;
  const networks = o.isolation?.allowNetworks ? [...o.isolation.allowNetworks] : env.allowNetworks;
  const config: ServerConfig = {
    host: o.host ?? env.host ?? DEFAULT_HOST,
    port: o.port ?? env.port ?? DEFAULT_PORT,
    apiKey,
    apiKeyGenerated: givenKey === undefined,
    dataDir: o.dataDir ?? env.dataDir,
    publicUrl: o.publicUrl,
    logLevel: logLevel as LogLevel, // an option's was checked by the schema
    maxInstances: o.maxInstances ?? env.maxInstances ?? DEFAULT_MAX_INSTANCES,
    maxUploadBytes: o.maxUploadBytes ?? env.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES,
    maxExtensionBytes: o.maxExtensionBytes ?? env.maxExtensionBytes ?? DEFAULT_MAX_EXTENSION_BYTES,
    maxProfileBytes: o.maxProfileBytes ?? env.maxProfileBytes ?? DEFAULT_MAX_PROFILE_BYTES,
    maxProfileBytesReadBack:
      o.maxProfileBytesReadBack ??
      env.maxProfileBytesReadBack ??
      DEFAULT_MAX_PROFILE_BYTES_READ_BACK,
    storeCaps: {
      authStates: {
        count:
          o.maxAuthStatesPerProject ??
          env.maxAuthStatesPerProject ??
          DEFAULT_STORE_CAPS.authStates.count,
        bytes:
          o.maxAuthStateBytesPerProject ??
          env.maxAuthStateBytesPerProject ??
          DEFAULT_STORE_CAPS.authStates.bytes,
        totalBytes:
          o.maxAuthStateBytesTotal ??
          env.maxAuthStateBytesTotal ??
          DEFAULT_STORE_CAPS.authStates.totalBytes,
        stateBytes:
          o.maxAuthStateBytes ?? env.maxAuthStateBytes ?? DEFAULT_STORE_CAPS.authStates.stateBytes,
      },
      profiles: {
        count:
          o.maxProfilesPerProject ?? env.maxProfilesPerProject ?? DEFAULT_STORE_CAPS.profiles.count,
        bytes:
          o.maxProfileBytesPerProject ??
          env.maxProfileBytesPerProject ??
          DEFAULT_STORE_CAPS.profiles.bytes,
        totalBytes:
          o.maxProfileBytesTotal ??
          env.maxProfileBytesTotal ??
          DEFAULT_STORE_CAPS.profiles.totalBytes,
      },
      extensions: {
        count: o.maxExtensions ?? env.maxExtensions ?? DEFAULT_STORE_CAPS.extensions.count,
        bytes:
          o.maxExtensionBytesTotal ??
          env.maxExtensionBytesTotal ??
          DEFAULT_STORE_CAPS.extensions.bytes,
      },
    },
    maxConnectionsPerClient: o.maxConnectionsPerClient ?? env.maxConnectionsPerClient,
    warmPool,
    sandboxStock: o.sandboxStock ?? env.sandboxStock ?? DEFAULT_SANDBOX_STOCK,
    programs: env.programs(o),
    sandbox: {
      root: o.sandboxRoot ?? env.sandboxRoot ?? DEFAULT_SANDBOX_ROOT,
      bwrapPath: o.bwrapPath ?? env.bwrapPath,
      // copies: freezing must not reach the caller's objects
      isolation: {
        ...o.isolation,
        ...(o.isolation?.allowHostPorts && { allowHostPorts: [...o.isolation.allowHostPorts] }),
        ...(networks && { allowNetworks: networks }),
        // startServer from code is the embedded default: one user's own scripts (serve says off)
        allowUnlimited: o.isolation?.allowUnlimited ?? env.allowUnlimited ?? true,
      },
    },
    artifacts: {
      retentionMs: retention * 1000,
      maxRetainedBytes:
        o.artifactRetainMaxBytes ?? env.artifactRetainMaxBytes ?? DEFAULT_ARTIFACT_RETAIN_MAX_BYTES,
      maxDownloads:
        o.artifactMaxDownloads ?? env.artifactMaxDownloads ?? DEFAULT_ARTIFACT_MAX_DOWNLOADS,
    },
    mcp: {
      idleMs: mcpIdle * 1000,
      maxSessions: o.mcpMaxSessions ?? env.mcpMaxSessions ?? DEFAULT_MCP_MAX_SESSIONS,
      maxSessionsPerProject:
        o.mcpMaxSessionsPerProject ??
        env.mcpMaxSessionsPerProject ??
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
