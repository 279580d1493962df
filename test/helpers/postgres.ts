/**
 * A real PostgreSQL server for a test file: Debian's PostgreSQL 15 (`initdb` + `pg_ctl`, as the
 * `postgres` user) in a temp directory, on a free loopback port, with `fsync` off. `stop()`
 * ends it and removes its directory.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = '/usr/lib/postgresql/15/bin';

export interface TestPostgres {
  /** `postgres://burrow@127.0.0.1:PORT/postgres` (trust authentication, loopback only). */
  url: string;
  port: number;
  dir: string;
  /** Stop the server (fast shutdown) and keep its files, for a restart. */
  pause(): void;
  /** Start it again after `pause()`. */
  resume(): void;
  /** Stop it (every connection ends) and start it again, down for about `downMs`. */
  restart(downMs?: number): Promise<void>;
  stop(): void;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

const asPostgres = (args: string[]) =>
  execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: 'pipe' });

export async function startPostgres(): Promise<TestPostgres> {
  if (!existsSync(`${BIN}/initdb`)) {
    throw new Error(`PostgreSQL 15 is not installed (${BIN}): run scripts/setup.sh`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'burrow-pg-'));
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
  const port = await freePort();
  const start = () =>
    asPostgres([
      `${BIN}/pg_ctl`,
      '-D',
      data,
      '-l',
      join(dir, 'log'),
      '-w',
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
      'start',
    ]);
  const stopServer = () => {
    spawnSync(
      'runuser',
      ['-u', 'postgres', '--', `${BIN}/pg_ctl`, '-D', data, '-m', 'fast', '-w', 'stop'],
      {
        stdio: 'ignore',
      },
    );
  };
  start();
  return {
    url: `postgres://burrow@127.0.0.1:${port}/postgres`,
    port,
    dir,
    pause: stopServer,
    resume: start,
    async restart(downMs = 0) {
      stopServer();
      await new Promise((r) => setTimeout(r, downMs));
      start();
    },
    stop() {
      stopServer();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function pgIds(): { uid: number; gid: number } {
  const out = execFileSync('id', ['postgres'], { encoding: 'utf8' });
  const uid = Number(/uid=(\d+)/.exec(out)?.[1]);
  const gid = Number(/gid=(\d+)/.exec(out)?.[1]);
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('no postgres user');
  return { uid, gid };
}
