import { parseArgs } from 'node:util';
import { serveLogDestination } from '../internal/log-format.js';
import {
  allowUnlimitedVariable,
  DEFAULT_ARTIFACT_RETENTION_SECONDS,
  DEFAULT_DRAIN_SECONDS,
  DEFAULT_HOST,
  DEFAULT_LOG_LEVEL,
  DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
  DEFAULT_PORT,
  DEFAULT_SANDBOX_STOCK,
  parseCpus,
  parseInteger,
  parseLogLevel,
  parseSize,
  parseWarmPool,
  type IsolationOptions,
  type ServerOptions,
} from '../server/config.js';
import { startServer } from '../server/index.js';
import { hasPassword, hideSecretArgs, readSecretFile } from './secrets.js';

export const usage = `burrow serve [--host ${DEFAULT_HOST}] [--port ${DEFAULT_PORT}] [--api-key K | --api-key-file PATH]
            [--data-dir D] [--max-instances N] [--public-url URL] [--log-level ${DEFAULT_LOG_LEVEL}]
            [--max-connections-per-client N] [--warm-pool N | --warm-pool browser=N,ubuntu=M]
            [--sandbox-stock N]
            [--instance-memory SIZE] [--instance-pids N] [--instance-cpus N] [--instance-disk SIZE]
            [--allow-host-loopback] [--allow-host-port PORT]...
            [--allow-network CIDR]... [--allow-unlimited] [--insecure-no-isolation]
            [--secret-key-file PATH] [--old-secret-key-file PATH]...
            [--artifact-retention SECONDS]
            [--cluster postgres://… | --cluster-url-file PATH [--node-name NAME] [--node-url URL]]

Runs the Remote Instance Control Service.

The API key comes from the first of: --api-key, --api-key-file, BURROW_API_KEY,
BURROW_API_KEY_FILE; else a random one is printed once at start. A key file holds the key alone
(a trailing newline is ignored). Giving both the key and a key file on the same level (two flags,
or two variables) is an error. The key is never logged, and never reaches a process the server
starts. Give it with --api-key-file or BURROW_API_KEY_FILE (a file of mode 0600) or
BURROW_API_KEY: a command line can be read by every local user, so --api-key warns (and the server
hides it from its command line once started, which leaves a short window).

  --max-connections-per-client N  authenticated connections one client address may hold
                                  (default ${DEFAULT_MAX_CONNECTIONS_PER_CLIENT}; 0 = no cap); past it requests get 429. Those
                                  not authenticated yet have a budget of 16 of their own,
                                  oldest closed first
  --warm-pool N                   keep N browser instances started, so that start takes one in
                                  milliseconds; browser=N,ubuntu=M for both types. They count
                                  against --max-instances and are not listed until taken
  --sandbox-stock N               keep N sandboxes (namespaces, cgroup, disk; no browser) made
                                  ahead for starts the warm pool does not serve (default ${DEFAULT_SANDBOX_STOCK};
                                  0 = build each at its start); not counted as instances
  --instance-memory SIZE          memory limit of each instance, e.g. 2g (suffixes k, m, g, t)
  --instance-pids N               most processes and threads in each instance
  --instance-cpus N               CPU share of each instance in cores, e.g. 1.5
  --instance-disk SIZE            disk quota of each instance, e.g. 4g
  --allow-host-loopback           let instances reach services on the host's loopback
  --allow-host-port PORT          let instances reach this host loopback port (repeatable)
  --allow-network CIDR            let instances reach this private network, e.g. 10.0.0.0/8
                                  (repeatable; private networks are refused by default)
  --allow-unlimited               start instances even where this machine cannot limit their
                                  memory, processes and CPU (the 'limits' guarantee; also
                                  BURROW_ALLOW_UNLIMITED=1). Without it such starts answer 503:
                                  a server for others needs limits (as root, or in a cgroup v2
                                  subtree delegated to its user: burrow doctor says which)
  --insecure-no-isolation         start instances even where this machine cannot isolate them
                                  (they then run unisolated; trusted use only)
  --secret-key-file PATH          the key that encrypts saved auth states (32 bytes as 64 hex
                                  digits or base64: openssl rand -base64 32); else
                                  BURROW_SECRET_KEY, BURROW_SECRET_KEY_FILE, else one generated
                                  once into the data dir (secret-key, mode 0600)
  --old-secret-key-file PATH      a previous key (repeatable): states it sealed are re-encrypted
                                  with the current key at start; drop it afterwards
                                  (also BURROW_OLD_SECRET_KEY, BURROW_OLD_SECRET_KEY_FILE)
  --artifact-retention SECONDS    how long an instance's downloads and recordings stay
                                  fetchable after it stopped (default ${DEFAULT_ARTIFACT_RETENTION_SECONDS}; 0 = not kept; also
                                  BURROW_ARTIFACT_RETENTION_SECONDS)
  --cluster URL                   cluster mode: instance rows and auth states live in this
                                  PostgreSQL (postgres://user@host/db), shared by every node.
                                  Every node needs the same --secret-key-file. A URL with a
                                  password is refused here (every local user can read a command
                                  line): give it with --cluster-url-file or BURROW_DATABASE_URL,
                                  or keep the password in PGPASSFILE
  --cluster-url-file PATH         the same URL, read from a file (mode 0600; a trailing newline
                                  is ignored)
  --node-name NAME                this node's name, the same across restarts (default the host
                                  name; also BURROW_NODE_NAME)
  --node-url URL                  where the other nodes reach this one (default the URL it
                                  listens on; also BURROW_NODE_URL)

In cluster mode SIGTERM drains the node: no new instances, readiness (GET /readyz) false at
once, running instances go on until they end or BURROW_DRAIN_SECONDS (default ${DEFAULT_DRAIN_SECONDS}) pass, then
they stop (end_reason node_drained) and the process exits 0. SIGINT stops at once. GET /livez
and GET /readyz answer without the API key and say nothing but ok / not ready.`;

/** What `burrow serve` passes to `startServer`, and whether the key was generated. */
export interface ServeConfig {
  options: ServerOptions;
  /** No key was given anywhere: the server generates one, printed once. */
  generated: boolean;
}

/** The API key by precedence: flag, key-file flag, variable, key-file variable; else none. */
function apiKey(
  flags: { key: string | undefined; file: string | undefined },
  env: NodeJS.ProcessEnv,
): string | undefined {
  if (flags.key !== undefined && flags.file !== undefined) {
    throw new Error('give --api-key or --api-key-file, not both');
  }
  if (flags.key !== undefined) {
    if (flags.key === '') throw new Error('--api-key is empty');
    return flags.key;
  }
  if (flags.file !== undefined) return readSecretFile('--api-key-file', flags.file);
  const key = env.BURROW_API_KEY || undefined;
  const file = env.BURROW_API_KEY_FILE || undefined;
  if (key !== undefined && file !== undefined) {
    throw new Error('set BURROW_API_KEY or BURROW_API_KEY_FILE, not both');
  }
  if (file !== undefined) return readSecretFile('BURROW_API_KEY_FILE', file);
  return key;
}

/** Parses and checks `burrow serve`'s arguments; `undefined` when only help was asked for. */
export async function serveConfig(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<ServeConfig | undefined> {
  const { values } = parseArgs({ args: argv, options: SERVE_FLAGS });
  if (values.help) return undefined;
  return fromFlags(values, env);
}

/** `burrow serve`'s flags (docs/configuration.md lists each with its setting). */
export const SERVE_FLAGS = {
  host: { type: 'string' },
  port: { type: 'string' },
  'api-key': { type: 'string' },
  'api-key-file': { type: 'string' },
  'data-dir': { type: 'string' },
  'max-instances': { type: 'string' },
  'public-url': { type: 'string' },
  'log-level': { type: 'string' },
  'max-connections-per-client': { type: 'string' },
  'allow-host-loopback': { type: 'boolean' },
  'allow-host-port': { type: 'string', multiple: true },
  'allow-network': { type: 'string', multiple: true },
  'insecure-no-isolation': { type: 'boolean' },
  'allow-unlimited': { type: 'boolean' },
  'instance-memory': { type: 'string' },
  'instance-pids': { type: 'string' },
  'instance-cpus': { type: 'string' },
  'instance-disk': { type: 'string' },
  'warm-pool': { type: 'string' },
  'sandbox-stock': { type: 'string' },
  'secret-key-file': { type: 'string' },
  'old-secret-key-file': { type: 'string', multiple: true },
  'artifact-retention': { type: 'string' },
  cluster: { type: 'string' },
  'cluster-url-file': { type: 'string' },
  'node-name': { type: 'string' },
  'node-url': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type ServeValues = ReturnType<typeof parseArgs<{ options: typeof SERVE_FLAGS }>>['values'];

async function fromFlags(values: ServeValues, env: NodeJS.ProcessEnv): Promise<ServeConfig> {
  const port =
    values.port === undefined ? undefined : parseInteger('--port', values.port, 0, 65535);
  const maxInstances =
    values['max-instances'] === undefined
      ? undefined
      : parseInteger('--max-instances', values['max-instances'], 1);
  const maxConnectionsPerClient =
    values['max-connections-per-client'] === undefined
      ? undefined
      : parseInteger('--max-connections-per-client', values['max-connections-per-client'], 0);
  const key = apiKey({ key: values['api-key'], file: values['api-key-file'] }, env);

  const cpusText = values['instance-cpus'];
  const cpus = cpusText === undefined ? undefined : parseCpus('--instance-cpus', cpusText);
  const ports = [
    ...new Set(
      (values['allow-host-port'] ?? []).map((p) => parseInteger('--allow-host-port', p, 1, 65535)),
    ),
  ];
  const isolation: IsolationOptions = {
    ...(values['allow-host-loopback'] && { allowHostLoopback: true }),
    ...(ports.length > 0 && { allowHostPorts: ports }),
    ...(values['allow-network'] && { allowNetworks: values['allow-network'] }),
    ...(values['insecure-no-isolation'] && { insecureNoIsolation: true }),
    // a server for others starts no instance without limits unless told (startServer's default
    // is the embedded one's: on)
    allowUnlimited: values['allow-unlimited'] ?? allowUnlimitedVariable(env) ?? false,
    ...(values['instance-memory'] !== undefined && {
      memoryBytes: parseSize('--instance-memory', values['instance-memory']),
    }),
    ...(values['instance-pids'] !== undefined && {
      pids: parseInteger('--instance-pids', values['instance-pids'], 1),
    }),
    ...(cpus !== undefined && { cpus }),
    ...(values['instance-disk'] !== undefined && {
      diskBytes: parseSize('--instance-disk', values['instance-disk']),
    }),
  };

  const options: ServerOptions = {
    ...(values.host !== undefined && { host: values.host }),
    ...(port !== undefined && { port }),
    ...(key !== undefined && { apiKey: key }),
    ...(values['data-dir'] !== undefined && { dataDir: values['data-dir'] }),
    ...(maxInstances !== undefined && { maxInstances }),
    ...(values['public-url'] !== undefined && { publicUrl: values['public-url'] }),
    ...(values['log-level'] !== undefined && {
      logLevel: parseLogLevel('--log-level', values['log-level']),
    }),
    ...(maxConnectionsPerClient !== undefined && { maxConnectionsPerClient }),
    ...(values['warm-pool'] !== undefined && {
      warmPool: parseWarmPool(values['warm-pool'], '--warm-pool'),
    }),
    ...(values['sandbox-stock'] !== undefined && {
      sandboxStock: parseInteger('--sandbox-stock', values['sandbox-stock'], 0),
    }),
    isolation,
    ...(values['secret-key-file'] !== undefined && { secretKeyFile: values['secret-key-file'] }),
    ...(values['old-secret-key-file'] !== undefined && {
      oldSecretKeyFiles: values['old-secret-key-file'],
    }),
    ...(values['artifact-retention'] !== undefined && {
      artifactRetentionSeconds: parseInteger(
        '--artifact-retention',
        values['artifact-retention'],
        0,
      ),
    }),
  };
  const databaseUrl = clusterUrl(values.cluster, values['cluster-url-file'], env);
  const node = {
    ...(values['node-name'] !== undefined && { nodeName: values['node-name'] }),
    ...(values['node-url'] !== undefined && { nodeUrl: values['node-url'] }),
  };
  if (databaseUrl === undefined && Object.keys(node).length > 0) {
    throw new Error(
      '--node-name and --node-url need --cluster, --cluster-url-file or BURROW_DATABASE_URL',
    );
  }
  // taken here, so that the variable can leave the environment before the server starts
  if (databaseUrl !== undefined) options.cluster = { databaseUrl, ...node };
  return { options, generated: key === undefined };
}

/**
 * The cluster's database URL: `--cluster`, else `--cluster-url-file`, else BURROW_DATABASE_URL.
 * `--cluster` with a password is refused: every local user could read it in `ps` for as long as
 * the node runs (a URL without one, with the password in PGPASSFILE or peer authentication, is
 * fine there).
 */
function clusterUrl(
  flag: string | undefined,
  file: string | undefined,
  env: NodeJS.ProcessEnv,
): string | undefined {
  if (flag !== undefined && file !== undefined) {
    throw new Error('give --cluster or --cluster-url-file, not both');
  }
  if (flag !== undefined && hasPassword(flag)) {
    throw new Error(
      '--cluster: the URL holds a password, which every local user can read on the command line; ' +
        'give the URL in a file (--cluster-url-file PATH, mode 0600) or in BURROW_DATABASE_URL, ' +
        'or leave the password out of it (PGPASSFILE, peer authentication)',
    );
  }
  const [source, url] =
    file !== undefined
      ? ['--cluster-url-file', readSecretFile('--cluster-url-file', file, 'URL')]
      : flag !== undefined
        ? ['--cluster', flag]
        : ['BURROW_DATABASE_URL', env.BURROW_DATABASE_URL || undefined];
  // (never the URL itself in the message: it may hold a password)
  if (url !== undefined && !/^postgres(ql)?:\/\//.test(url)) {
    throw new Error(`${source}: expected a postgres:// URL (postgres://user@host:5432/db)`);
  }
  return url;
}

/**
 * Keeps the secrets out of what other users and child processes can read: the process title
 * (`/proc/N/cmdline`, which every local user can read) loses the `--api-key` value, and the
 * secret variables leave the environment that every process the server starts would inherit.
 */
function hideSecrets(argv: readonly string[]): void {
  hideSecretArgs(argv);
  delete process.env.BURROW_API_KEY;
  delete process.env.BURROW_API_KEY_FILE;
  delete process.env.BURROW_DATABASE_URL;
}

/**
 * The line `serve` prints at start: which of this machine's loopback ports instances may reach
 * through their egress, and the switch that opens one (issue 20). Anything else on the host's
 * loopback is refused (a navigation there fails with `net::ERR_CONNECTION_REFUSED`).
 */
function hostPortsLine(isolation: IsolationOptions = {}): string {
  const open =
    'open one with --allow-host-port PORT (repeatable) or all with --allow-host-loopback';
  if (isolation.allowHostLoopback) {
    return "host ports: instances may reach every loopback port of this machine but burrow's own (--allow-host-loopback)";
  }
  const ports = isolation.allowHostPorts ?? [];
  if (ports.length === 0) {
    return `host ports: instances may reach none of this machine's loopback ports; ${open}`;
  }
  const list = [...ports].sort((a, b) => a - b).join(', ');
  return `host ports: instances may reach ${list} on this machine's loopback (--allow-host-port); ${open}`;
}

export async function run(argv: string[]): Promise<void> {
  const config = await serveConfig(argv);
  if (!config) {
    console.log(usage);
    return;
  }
  hideSecrets(argv);
  if (config.options.isolation?.insecureNoIsolation) {
    console.error(
      'burrow: warning: --insecure-no-isolation: where this machine cannot isolate instances, they run unisolated',
    );
  }
  // readable lines in a terminal, JSON lines otherwise (log-format.ts)
  const logDestination = serveLogDestination();
  const server = await startServer({
    ...config.options,
    ...(logDestination && { logDestination }),
  });
  if (config.generated) console.log(`API key (generated, shown once): ${server.apiKey}`);
  console.log(`burrow listening on ${server.url} (data dir ${server.dataDir})`);
  console.log(hostPortsLine(config.options.isolation));
  // what `burrow doctor` says (programs, isolation, instance types), so an operator sees it
  // without asking
  const { formatSummary, report } = await import('./doctor.js');
  const found = await report(config.options);
  for (const line of formatSummary(found)) console.log(`doctor: ${line}`);

  // a drain, begun by SIGTERM or by `burrow drain` (POST /v1/node/drain), ends the process
  void server.drained.then(() => process.exit(0));
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    if (signal === 'SIGTERM' && server.clustered) {
      // a cluster node drains: its instances run on until they end or the drain deadline
      console.log(`${signal}: draining (no new instances; running ones go on until they end)…`);
      server.drain().catch((err: unknown) => {
        console.error(err);
        process.exit(1);
      });
      return;
    }
    console.log(`${signal}: stopping every instance…`);
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
