/**
 * A cluster on separate machines, on one machine (issue #22, "Tested for real"): real burrow
 * nodes (`burrow serve --cluster`, each a process of its own) and a real PostgreSQL, each in a
 * network namespace of its own, wired to one bridge, plus a client namespace the test's client
 * code runs in. A node sees the others and the database only at their addresses on that bridge,
 * as it would across a network; nothing touches the host's interfaces.
 *
 *     burrow-t<pid>-<rand>-br   the bridge br0 and the cluster's public address (.1, netns-front.ts)
 *     burrow-t<pid>-<rand>-db   PostgreSQL (.2:5432)
 *     burrow-t<pid>-<rand>-cl   the client (.5, netns-client.ts)
 *     burrow-t<pid>-<rand>-n1…  node-1… (.11…, port 8787 each)
 *
 * on 10.213.X.0/24 with a random X. Nodes start with `nsenter --net=/run/netns/NAME` (not `ip netns
 * exec`, which remounts /sys and so hides the cgroups burrow needs). Every node has its own data
 * dir and shares the API key, the auth-state key, the lease length and the public URL.
 *
 * `close()` kills every process the harness started (each node's process group, the client, the
 * front, PostgreSQL, and anything still inside its namespaces), then deletes every namespace; it
 * runs whatever failed before it, and a harness whose test process died is swept by the next one
 * (its namespaces carry its pid). Only root can make namespaces: the harness refuses otherwise.
 *
 * Client jobs run concurrently, so a test can keep a load loop going in the client while it
 * kills or drains a node:
 *
 *     const load = cluster.client(async (_lib, a) => { ...a bounded loop of fetches... }, args);
 *     await cluster.kill(cluster.nodes[1]!, 'SIGKILL'); // or 'SIGTERM'; node.child, node.pids
 *     const seen = await load;
 *     await cluster.restart(cluster.nodes[1]!);
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { ClientLib } from './netns-client.js';
import { startPostgres, type TestPostgres } from './postgres.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Every node listens on this port, at its own address. */
export const NODE_PORT = 8787;
const NETNS_DIR = '/run/netns';
const PREFIX = 'burrow-t';

export interface NetnsClusterOptions {
  /** How many nodes; default 3. */
  nodes?: number;
  /** Every node's lease (`BURROW_LEASE_SECONDS`); default 5. */
  leaseSeconds?: number;
  /** Start every node (at the same moment) before returning; default true. */
  start?: boolean;
  /** More `burrow serve` flags for every node. */
  args?: readonly string[];
}

/** One node: its place on the network and, while it runs, its process. */
export interface NetnsNode {
  /** `node-1`, … (its `--node-name`). */
  readonly name: string;
  readonly netns: string;
  readonly address: string;
  /** `http://ADDRESS:8787`: where other nodes reach it (its `BURROW_NODE_URL`). */
  readonly url: string;
  readonly dataDir: string;
  /** The running process (`nsenter` execs node: the same pid), or undefined. */
  child: ChildProcess | undefined;
  /** The pid of every run, oldest first. */
  readonly pids: number[];
  /** Everything it printed (stdout and stderr), across its runs. */
  log(): string;
}

/** A function the client namespace runs: its source travels, not its closure. */
export type ClientCode<A, R> = (lib: ClientLib, arg: A) => Promise<R>;

export interface NetnsCluster extends AsyncDisposable {
  /** `burrow-t<pid>-<rand>`, the start of every namespace's name. */
  readonly tag: string;
  /** `10.213.X.0/24`. */
  readonly subnet: string;
  readonly apiKey: string;
  /** The cluster's public URL (every node's `--public-url`): the front, in the bridge's namespace. */
  readonly publicUrl: string;
  readonly pg: TestPostgres;
  readonly nodes: readonly NetnsNode[];
  /** Every namespace the harness made. */
  readonly namespaces: readonly string[];
  /** Start `node` (not running) and wait until it listens. */
  start(node: NetnsNode): Promise<void>;
  /** Signal `node`'s process (only it: not its process group) and wait until it exits. */
  kill(
    node: NetnsNode,
    signal?: NodeJS.Signals,
  ): Promise<{ code: number | null; signal: string | null }>;
  /** SIGTERM `node` if it runs, then start it again (same name, data dir and address). */
  restart(node: NetnsNode): Promise<void>;
  /** New connections to the public URL go to `node` from now on (existing ones stay). */
  front(node: NetnsNode): Promise<void>;
  /** Run `fn` in the client namespace's process; its JSON-able result. */
  client<A, R>(fn: ClientCode<A, R>, arg: A): Promise<R>;
  /** A query on the cluster's database (through its Unix socket; `search_path` is `burrow`). */
  query<T extends object = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** The node owning an instance id, by the slot in it (the database's `nodes` table). */
  ownerOf(id: string): Promise<NetnsNode>;
  /** Kill everything, delete every namespace. Idempotent. */
  close(): Promise<void>;
}

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: 'pipe' });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Pids of the processes in namespace `name` (`ip netns pids`). */
export function netnsPids(name: string): number[] {
  try {
    return execFileSync('ip', ['netns', 'pids', name], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // no such namespace
  }
}

/**
 * What harnesses whose test process is gone (killed before their `close()`) left: their
 * namespaces, the processes still in them, their directory.
 */
function sweepStale(): void {
  const stale = (name: string) => {
    const m = /^burrow-t(\d+)-[0-9a-f]+/.exec(name);
    return m !== null && !alive(Number(m[1]));
  };
  for (const name of existsSync(NETNS_DIR) ? readdirSync(NETNS_DIR) : []) {
    if (!stale(name)) continue;
    for (const pid of netnsPids(name)) killQuietly(pid, 'SIGKILL');
    try {
      ip('netns', 'del', name);
    } catch {
      /* another sweeper took it */
    }
  }
  for (const name of readdirSync(tmpdir())) {
    if (stale(name)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    /* gone already */
  }
}

function exited(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Spawns `command` in namespace `netns`, in a process group of its own. */
function spawnIn(
  netns: string,
  args: string[],
  opts: { ipc?: boolean; env?: NodeJS.ProcessEnv } = {},
): ChildProcess {
  return spawn('nsenter', [`--net=${NETNS_DIR}/${netns}`, ...args], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', ...(opts.ipc ? (['ipc'] as const) : [])],
    env: opts.env ?? process.env,
  });
}

/** The harness's own environment without burrow's variables: each node gets its own. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BURROW_')) env[k] = v;
  return env;
}

export async function netnsCluster(opts: NetnsClusterOptions = {}): Promise<NetnsCluster> {
  if (process.getuid?.() !== 0) {
    throw new Error(
      'the network-namespace cluster harness needs root (it makes namespaces, veths and a bridge): run this test as root, as CI does',
    );
  }
  sweepStale();
  const count = opts.nodes ?? 3;
  const lease = opts.leaseSeconds ?? 5;
  const tag = `${PREFIX}${process.pid}-${randomBytes(2).toString('hex')}`;
  const x = randomBytes(1)[0]!;
  const net = (host: number) => `10.213.${x}.${host}`;
  const subnet = `${net(0)}/24`;
  // everything on disk (data dirs, keys, PostgreSQL's files) is under the tag's name too
  const dir = join(tmpdir(), tag);
  mkdirSync(dir, { mode: 0o755 });
  const namespaces: string[] = [];
  const children = new Set<ChildProcess>();
  let pgServer: TestPostgres | undefined;
  let pool: pg.Pool | undefined;

  // what close() does, and, should this process exit without it, the same done synchronously
  const killAll = (signal: NodeJS.Signals) => {
    for (const c of children) if (c.pid) killQuietly(-c.pid, signal);
  };
  const onExit = () => {
    killAll('SIGKILL');
    try {
      pgServer?.stop();
    } catch {
      /* best effort */
    }
    for (const ns of namespaces) {
      for (const pid of netnsPids(ns)) killQuietly(pid, 'SIGKILL');
      try {
        ip('netns', 'del', ns);
      } catch {
        /* best effort */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      const errors: unknown[] = [];
      // nodes stop their instances on SIGTERM; whatever is left of a group then gets SIGKILL
      const running = [...children].filter((c) => c.exitCode === null && c.signalCode === null);
      for (const c of running) killQuietly(c.pid!, 'SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(running.map(exited)),
        new Promise((r) => (timer = setTimeout(r, 20_000))),
      ]);
      clearTimeout(timer);
      killAll('SIGKILL');
      await Promise.all([...children].map(exited));
      try {
        pgServer?.stop(); // thaws a frozen one first
      } catch (e) {
        errors.push(e);
      }
      await pool?.end().catch(() => {}); // its server is gone: nothing to close cleanly
      for (const ns of namespaces) {
        for (const pid of netnsPids(ns)) killQuietly(pid, 'SIGKILL');
      }
      for (const ns of [...namespaces].reverse()) {
        try {
          ip('netns', 'del', ns);
        } catch (e) {
          errors.push(e);
        }
      }
      rmSync(dir, { recursive: true, force: true });
      process.removeListener('exit', onExit);
      if (errors.length > 0) throw new AggregateError(errors, 'the harness did not clean up');
    })());

  try {
    // the network: a bridge in a namespace of its own, a veth to it from every other one
    const bridge = `${tag}-br`;
    ip('netns', 'add', bridge);
    namespaces.push(bridge);
    ip('-n', bridge, 'link', 'set', 'lo', 'up');
    ip('-n', bridge, 'link', 'add', 'br0', 'type', 'bridge');
    ip('-n', bridge, 'addr', 'add', `${net(1)}/24`, 'dev', 'br0');
    ip('-n', bridge, 'link', 'set', 'br0', 'up');
    const attach = (suffix: string, host: number): string => {
      const ns = `${tag}-${suffix}`;
      ip('netns', 'add', ns);
      namespaces.push(ns);
      // both ends are made inside their namespaces: the host never holds either
      ip(
        'link',
        'add',
        'eth0',
        'netns',
        ns,
        'type',
        'veth',
        'peer',
        'name',
        suffix,
        'netns',
        bridge,
      );
      ip('-n', bridge, 'link', 'set', suffix, 'master', 'br0');
      ip('-n', bridge, 'link', 'set', suffix, 'up');
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'addr', 'add', `${net(host)}/24`, 'dev', 'eth0');
      ip('-n', ns, 'link', 'set', 'eth0', 'up');
      return ns;
    };
    const dbNs = attach('db', 2);
    const clientNs = attach('cl', 5);
    const nodes: NetnsNode[] = [];
    const outputs = new Map<NetnsNode, string>();
    for (let i = 1; i <= count; i++) {
      const address = net(10 + i);
      const node: NetnsNode = {
        name: `node-${i}`,
        netns: attach(`n${i}`, 10 + i),
        address,
        url: `http://${address}:${NODE_PORT}`,
        dataDir: join(dir, `node-${i}`),
        child: undefined,
        pids: [],
        log: () => outputs.get(node) ?? '',
      };
      mkdirSync(node.dataDir, { mode: 0o700 });
      nodes.push(node);
    }

    pgServer = await startPostgres({ netns: dbNs, address: net(2), allow: subnet, parent: dir });
    const db = pgServer;
    pool = new pg.Pool({
      connectionString: db.socketUrl,
      max: 2,
      options: '-c search_path=burrow',
    });
    pool.on('error', () => {}); // a paused database drops idle connections

    const apiKey = `netns-${randomBytes(12).toString('hex')}`;
    const apiKeyFile = join(dir, 'api-key');
    writeFileSync(apiKeyFile, `${apiKey}\n`, { mode: 0o600 });
    const secretKeyFile = join(dir, 'secret-key');
    writeFileSync(secretKeyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    const publicUrl = `http://${net(1)}:${NODE_PORT}`;

    // the public address: a byte-for-byte front in the bridge's namespace, to node 1 at first
    const frontChild = spawnIn(
      bridge,
      [
        process.execPath,
        '--import',
        'tsx',
        'test/helpers/netns-front.ts',
        net(1),
        String(NODE_PORT),
      ],
      { ipc: true },
    );
    children.add(frontChild);
    frontChild.stdout!.resume();
    frontChild.stderr!.resume();
    const frontReady = ipcAnswer(frontChild, (m) => 'listening' in m, 'the front to listen');

    // the client: one process for the whole file, running each job it is sent
    const clientChild = spawnIn(
      clientNs,
      [process.execPath, '--import', 'tsx', 'test/helpers/netns-client.ts'],
      { ipc: true },
    );
    children.add(clientChild);
    let clientErr = '';
    clientChild.stderr!.on(
      'data',
      (d: Buffer) => (clientErr = (clientErr + d.toString()).slice(-4000)),
    );
    clientChild.stdout!.resume();
    let seq = 0;

    const start = async (node: NetnsNode) => {
      if (node.child && node.child.exitCode === null && node.child.signalCode === null) {
        throw new Error(`${node.name} is running already`);
      }
      const child = spawnIn(
        node.netns,
        [
          process.execPath,
          '--import',
          'tsx',
          'src/cli/main.ts',
          'serve',
          '--cluster',
          db.url,
          '--host',
          node.address,
          '--port',
          String(NODE_PORT),
          '--data-dir',
          node.dataDir,
          '--api-key-file',
          apiKeyFile,
          '--secret-key-file',
          secretKeyFile,
          '--node-name',
          node.name,
          '--public-url',
          publicUrl,
          ...(opts.args ?? []),
        ],
        {
          env: {
            ...cleanEnv(),
            BURROW_NODE_URL: node.url,
            BURROW_LEASE_SECONDS: String(lease),
            BURROW_LOG_LEVEL: 'warn',
          },
        },
      );
      children.add(child);
      node.child = child;
      node.pids.push(child.pid!);
      const run = `--- ${node.name} pid ${child.pid} ---\n`;
      outputs.set(node, node.log() + run);
      const append = (d: Buffer) => outputs.set(node, node.log() + d.toString());
      child.stdout!.on('data', append);
      child.stderr!.on('data', append);
      const listening = `burrow listening on ${node.url}`;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`${node.name} did not listen within 90 s:\n${node.log()}`));
        }, 90_000);
        const check = () => {
          if (node.log().includes(listening)) {
            cleanup();
            resolve();
          }
        };
        const early = () => {
          cleanup();
          reject(new Error(`${node.name} exited before it listened:\n${node.log()}`));
        };
        const cleanup = () => {
          clearTimeout(timer);
          child.stdout!.off('data', check);
          child.off('exit', early);
        };
        child.stdout!.on('data', check);
        child.once('exit', early);
      });
    };

    const kill = async (node: NetnsNode, signal: NodeJS.Signals = 'SIGKILL') => {
      const child = node.child;
      if (!child) throw new Error(`${node.name} was never started`);
      killQuietly(child.pid!, signal);
      return exited(child);
    };

    const cluster: NetnsCluster = {
      tag,
      subnet,
      apiKey,
      publicUrl,
      pg: db,
      nodes,
      namespaces,
      start,
      kill,
      async restart(node) {
        if (node.child && node.child.exitCode === null && node.child.signalCode === null) {
          await kill(node, 'SIGTERM');
        }
        await start(node);
      },
      async front(node) {
        const done = ipcAnswer(frontChild, (m) => 'ok' in m, 'the front to switch');
        frontChild.send({ to: `${node.address}:${NODE_PORT}` });
        await done;
      },
      async client<A, R>(fn: ClientCode<A, R>, arg: A): Promise<R> {
        const mine = ++seq;
        const answer = ipcAnswer(
          clientChild,
          (m) => m.seq === mine,
          'the client',
          () => clientErr,
        );
        clientChild.send({ seq: mine, code: fn.toString(), arg });
        const m = (await answer) as { value?: R; error?: string };
        if (m.error !== undefined) throw new Error(`in the client namespace: ${m.error}`);
        return m.value as R;
      },
      async query<T extends object>(text: string, params: unknown[] = []) {
        return (await pool!.query(text, params)).rows as T[];
      },
      async ownerOf(id) {
        const slot = parseInt(/^inst_c([0-9a-f]{3})/.exec(id)?.[1] ?? 'x', 16);
        const rows = await cluster.query<{ name: string }>(
          'SELECT name FROM nodes WHERE slot = $1',
          [slot],
        );
        const node = nodes.find((n) => n.name === rows[0]?.name);
        if (!node) throw new Error(`no node owns ${id}`);
        return node;
      },
      close,
      [Symbol.asyncDispose]: close,
    };

    await frontReady;
    await cluster.front(nodes[0]!);
    if (opts.start !== false) await Promise.all(nodes.map(start));
    return cluster;
  } catch (err) {
    await close().catch((e: unknown) => {
      (err as Error).message += `\n(and the harness's clean-up failed: ${String(e)})`;
    });
    throw err;
  }
}

/** The next IPC message of `child` that `match`es; rejects if the child exits first. */
function ipcAnswer(
  child: ChildProcess,
  match: (m: Record<string, unknown>) => boolean,
  what: string,
  detail: () => string = () => '',
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: unknown) => {
      if (typeof m !== 'object' || m === null || !match(m as Record<string, unknown>)) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(m as Record<string, unknown>);
    };
    const onExit = (code: number | null, signal: string | null) => {
      child.off('message', onMessage);
      reject(new Error(`${what} exited (${code ?? signal}) before answering\n${detail()}`));
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}
