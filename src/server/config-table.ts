/**
 * The table of the server's settings: for each, its option, environment variable, `burrow serve`
 * flag, default and meaning, in the order docs/configuration.md lists them. The document's table
 * is made from it (`settingsTable`), and a unit test keeps the two, the options' schema and `burrow
 * serve`'s flags in step. Defaults are written from the constants of config-schema.ts, not again.
 */
import {
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
  DEFAULT_MAX_PROFILE_BYTES_READ_BACK,
  DEFAULT_MAX_UPLOAD_BYTES,
  DEFAULT_MCP_IDLE_SECONDS,
  DEFAULT_MCP_MAX_SESSIONS,
  DEFAULT_MCP_MAX_SESSIONS_PER_PROJECT,
  DEFAULT_PORT,
  DEFAULT_PROGRAMS,
  DEFAULT_SANDBOX_ROOT,
  DEFAULT_SANDBOX_STOCK,
  LOG_LEVELS,
} from './config-schema.js';

/** `value` as code. */
const lit = (value: string | number) => `\`${value}\``;
/** A byte count in the largest binary unit that divides it: `100 MiB`, `2 GiB`. */
const bytes = (n: number) => (n % 2 ** 30 === 0 ? `${n / 2 ** 30} GiB` : `${n / 2 ** 20} MiB`);

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
    default: lit(DEFAULT_HOST),
    meaning: 'interface to listen on (`0.0.0.0` or `::` for all)',
  },
  {
    option: 'port',
    env: 'BURROW_PORT',
    flags: ['--port'],
    default: lit(DEFAULT_PORT),
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
      'a file holding the key alone (not together with the key itself on the same level); the client commands (`burrow list`, `mcp`, `drain`, …) read it too, so that the key need not be on a command line',
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
    default: lit(DEFAULT_MAX_INSTANCES),
    meaning:
      'live instances at once; past it `start` answers 429 with a `Retry-After` computed from its instances’ deadlines and recent ends (as a full cluster’s)',
  },
  {
    option: 'maxUploadBytes',
    env: 'BURROW_MAX_UPLOAD_BYTES',
    default: bytes(DEFAULT_MAX_UPLOAD_BYTES),
    meaning: 'largest upload in bytes; past it 413',
  },
  {
    option: 'maxExtensionBytes',
    env: 'BURROW_MAX_EXTENSION_BYTES',
    default: bytes(DEFAULT_MAX_EXTENSION_BYTES),
    meaning: 'largest browser extension (its zip, and unpacked) in bytes; past it 413',
  },
  {
    option: 'maxProfileBytes',
    env: 'BURROW_MAX_PROFILE_BYTES',
    default: bytes(DEFAULT_MAX_PROFILE_BYTES),
    meaning:
      'largest persistent browser profile (sealed) in bytes; a bigger one is not saved (the old version stays)',
  },
  {
    option: 'maxProfileBytesReadBack',
    env: 'BURROW_MAX_PROFILE_BYTES_READ_BACK',
    default: bytes(DEFAULT_MAX_PROFILE_BYTES_READ_BACK),
    meaning:
      'bytes of profiles read back from stopping instances, or opened for starting ones, that the server holds at once, every instance’s together; a save that does not fit waits its turn (at most 2 min, then the old version stays), a start too (at most 2 min, then 503)',
  },
  {
    option: 'maxAuthStatesPerProject',
    env: 'BURROW_MAX_AUTH_STATES_PER_PROJECT',
    default: '`1000`',
    meaning:
      'saved auth states of one project (a single server: of the server); past it a save answers 507',
  },
  {
    option: 'maxAuthStateBytes',
    env: 'BURROW_MAX_AUTH_STATE_BYTES',
    default: '8 MiB',
    meaning:
      'bytes of one auth state as captured from a browser (its JSON); past it save_auth and modify_auth answer 413 and nothing is kept. What the server parses and seals on its main thread for one save is bounded by it',
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
    default: lit(DEFAULT_MAX_CONNECTIONS_PER_CLIENT),
    meaning:
      'authenticated connections per client (its address; every loopback address is one client, this host, and IPv6 counts by its /64; `0` = no cap); those not authenticated yet have a budget of 16 of their own',
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
    default: lit(DEFAULT_SANDBOX_STOCK),
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
    default: lit(DEFAULT_LOG_LEVEL),
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
    default: lit(DEFAULT_PROGRAMS.chromium),
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
    default: lit(DEFAULT_PROGRAMS.xvfb),
    meaning: 'Xvfb binary of ubuntu instances',
  },
  {
    option: 'x11vncPath',
    env: 'BURROW_X11VNC',
    default: lit(DEFAULT_PROGRAMS.x11vnc),
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
    default: `${lit(DEFAULT_SANDBOX_ROOT)} (a normal user: \`sandboxes\` in the data dir)`,
    meaning: 'instance disks and generated `/etc`s; every instance uid must be able to traverse it',
  },
  {
    option: 'isolation.memoryBytes',
    flags: ['--instance-memory'],
    default: bytes(DEFAULT_INSTANCE_LIMITS.memoryBytes),
    meaning: 'memory limit of each instance (flag: a size such as `2g`)',
  },
  {
    option: 'isolation.pids',
    flags: ['--instance-pids'],
    default: lit(DEFAULT_INSTANCE_LIMITS.pids),
    meaning: 'processes and threads in each instance',
  },
  {
    option: 'isolation.cpus',
    flags: ['--instance-cpus'],
    default: 'all cores but half of one, at least `1`',
    meaning: 'CPU time of each instance, in cores (e.g. `1.5`)',
  },
  {
    option: 'isolation.diskBytes',
    flags: ['--instance-disk'],
    default: bytes(DEFAULT_INSTANCE_LIMITS.diskBytes),
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
    option: 'isolation.allowNetworks',
    env: 'BURROW_ALLOW_NETWORK',
    flags: ['--allow-network'],
    default: 'none',
    meaning:
      'private networks (RFC 1918, 100.64/10, fc00::/7, the special-purpose ranges not routed on the internet, the networks of the host’s own interfaces and those it routes to, not by its default route; 6to4 and Teredo by their IPv6 network) instances may reach, as CIDRs (flag repeatable; variable comma-separated)',
  },
  {
    option: 'isolation.insecureNoIsolation',
    flags: ['--insecure-no-isolation'],
    default: 'off',
    meaning: 'start instances even where this machine cannot isolate them (they run unisolated)',
  },
  {
    option: 'isolation.allowUnlimited',
    env: 'BURROW_ALLOW_UNLIMITED',
    flags: ['--allow-unlimited'],
    default: 'off for `serve`; on for `startServer` from code',
    meaning:
      'start instances where this machine cannot limit their memory, processes and CPU (the `limits` guarantee; variable `1` or `0`). Off, such a start answers 503 `isolation_unavailable` naming the fix; on, an embedded server says once on stderr which guarantees are missing. `--insecure-no-isolation` implies it',
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
    default: lit(DEFAULT_ARTIFACT_RETENTION_SECONDS),
    meaning:
      'seconds downloads and recordings stay fetchable after their instance stopped (`0` = not kept)',
  },
  {
    option: 'artifactRetainMaxBytes',
    env: 'BURROW_ARTIFACT_RETAIN_MAX_BYTES',
    default: bytes(DEFAULT_ARTIFACT_RETAIN_MAX_BYTES),
    meaning: 'bytes the kept downloads and recordings of all instances may take together',
  },
  {
    option: 'artifactMaxDownloads',
    env: 'BURROW_ARTIFACT_MAX_DOWNLOADS',
    default: lit(DEFAULT_ARTIFACT_MAX_DOWNLOADS),
    meaning:
      'downloads one instance lists and keeps; later ones stay in its home only, and the log says so',
  },
  {
    option: 'mcpIdleSeconds',
    env: 'BURROW_MCP_IDLE_SECONDS',
    default: lit(DEFAULT_MCP_IDLE_SECONDS),
    meaning:
      'idle seconds after which an MCP session holding instances ends (one holding none ends after 2 min, or sooner)',
  },
  {
    option: 'mcpMaxSessions',
    env: 'BURROW_MCP_MAX_SESSIONS',
    default: lit(DEFAULT_MCP_MAX_SESSIONS),
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
    flags: ['--cluster', '--cluster-url-file'],
    default: 'none (one node, no database)',
    meaning:
      'cluster mode: instance rows and auth states live in this PostgreSQL, shared by every node (`postgres://…`); every node needs the same auth-state key (`BURROW_SECRET_KEY_FILE`). A URL with a password goes in the variable or in a file (`--cluster-url-file`, mode 0600): `--cluster` refuses one, as every local user can read a command line',
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
    default: lit(DEFAULT_LEASE_SECONDS),
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
    default: lit(DEFAULT_DRAIN_SECONDS),
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
