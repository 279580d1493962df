/**
 * A real PostgreSQL server for a test file: Debian's PostgreSQL 15 (`initdb` + `pg_ctl`, as the
 * `postgres` user) in a temp directory, on a free loopback port, with `fsync` off. `stop()`
 * ends it and removes its directory.
 *
 * Given a network namespace (`netns`, a name under /run/netns), it runs in there instead and
 * listens on `address` there (the multi-machine harness, netns-cluster.ts): clients of `allow`
 * (a CIDR) are trusted too. Its Unix socket, in its directory, reaches it from any namespace.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

const BIN = '/usr/lib/postgresql/15/bin';

export interface PostgresOptions {
  /** Run in this network namespace (`/run/netns/NAME`), on port 5432. */
  netns?: string;
  /** The address it listens on; default 127.0.0.1. */
  address?: string;
  /** A CIDR whose clients are trusted besides loopback, e.g. `10.213.7.0/24`. */
  allow?: string;
  /** The directory its own temp directory is made in; default the system's temp dir. */
  parent?: string;
}

export interface TestPostgres {
  /** `postgres://burrow@ADDRESS:PORT/postgres` (trust authentication, loopback only). */
  url: string;
  /** The same database through its Unix socket: reachable from every network namespace. */
  socketUrl: string;
  port: number;
  dir: string;
  /** Stop the server (fast shutdown) and keep its files, for a restart. */
  pause(): void;
  /** Start it again after `pause()`. */
  resume(): void;
  /** Stop it (every connection ends) and start it again, down for about `downMs`. */
  restart(downMs?: number): Promise<void>;
  /**
   * SIGSTOP every process of the server: connections stay open and queries hang without an
   * answer (as in a network partition), where `pause()` refuses them at once.
   */
  freeze(): void;
  /** SIGCONT what `freeze()` stopped. */
  thaw(): void;
  stop(): void;
}

const asPostgres = (args: string[]) =>
  execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: 'pipe' });

export async function startPostgres(opts: PostgresOptions = {}): Promise<TestPostgres> {
  if (!existsSync(`${BIN}/initdb`)) {
    throw new Error(`PostgreSQL 15 is not installed (${BIN}): run scripts/setup.sh`);
  }
  const dir = mkdtempSync(join(opts.parent ?? tmpdir(), 'burrow-pg-'));
  const { uid, gid } = pgIds();
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  asPostgres([
    `${BIN}/initdb`,
    '-D',
    data,
    '-U',
    'burrow',
    '-A',
    'trust',
    '--no-sync',
    '-E',
    'UTF8',
  ]);
  if (opts.allow) {
    appendFileSync(join(data, 'pg_hba.conf'), `host all all ${opts.allow} trust\n`);
  }
  const address = opts.address ?? '127.0.0.1';
  // a namespace of its own has every port free
  const port = opts.netns ? 5432 : await freePort();
  // pg_ctl's server stays in the namespace nsenter put pg_ctl in
  const [command, ...prefix] = opts.netns
    ? ['nsenter', `--net=/run/netns/${opts.netns}`, 'runuser']
    : ['runuser'];
  const start = () =>
    execFileSync(
      command!,
      [
        ...prefix,
        '-u',
        'postgres',
        '--',
        `${BIN}/pg_ctl`,
        '-D',
        data,
        '-l',
        join(dir, 'log'),
        '-w',
        '-o',
        `-p ${port} -k ${dir} -c listen_addresses=${address} -c fsync=off -c max_connections=200`,
        'start',
      ],
      { stdio: 'pipe' },
    );
  const stopServer = () => {
    spawnSync(
      'runuser',
      ['-u', 'postgres', '--', `${BIN}/pg_ctl`, '-D', data, '-m', 'fast', '-w', 'stop'],
      {
        stdio: 'ignore',
      },
    );
  };
  const signalAll = (signal: NodeJS.Signals) => {
    const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    // the postmaster first (it starts no new backend once stopped), then its children
    for (const pid of [postmaster, ...childrenOf(postmaster)]) {
      try {
        process.kill(pid, signal);
      } catch {
        /* gone already */
      }
    }
  };
  start();
  const urlHost = address.includes(':') ? `[${address}]` : address;
  return {
    url: `postgres://burrow@${urlHost}:${port}/postgres`,
    socketUrl: `postgres://burrow@${encodeURIComponent(dir)}:${port}/postgres`,
    port,
    dir,
    pause: stopServer,
    resume: start,
    async restart(downMs = 0) {
      stopServer();
      await new Promise((r) => setTimeout(r, downMs));
      start();
    },
    freeze: () => signalAll('SIGSTOP'),
    thaw: () => signalAll('SIGCONT'),
    stop() {
      try {
        signalAll('SIGCONT'); // a frozen server cannot stop
      } catch {
        /* not running */
      }
      stopServer();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Pids whose parent is `parent` (from /proc). */
function childrenOf(parent: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // the command may hold spaces and parentheses: the fields follow the last ')'
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) out.push(Number(entry));
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

function pgIds(): { uid: number; gid: number } {
  const out = execFileSync('id', ['postgres'], { encoding: 'utf8' });
  const uid = Number(/uid=(\d+)/.exec(out)?.[1]);
  const gid = Number(/gid=(\d+)/.exec(out)?.[1]);
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('no postgres user');
  return { uid, gid };
}
