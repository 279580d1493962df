/**
 * The cluster's database URL is never on a command line (`/proc/N/cmdline` is world-readable: any
 * local user reads it with `ps`). `burrow serve --cluster` refuses a URL holding a password, and
 * says where to put it instead; `--cluster-url-file` reads it from a file, and with a node
 * running on it against a real PostgreSQL that checks the password (scram), with an instance
 * started, no process on the machine has the password in its command line or its environment.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { eventually } from '../../helpers/server.js';

const root = resolve(import.meta.dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'burrow-cluster-url-'));
const children: ChildProcess[] = [];
let pg: TestPostgres;

beforeAll(async () => {
  pg = await startPostgres();
}, 60_000);

afterAll(async () => {
  for (const c of children) {
    c.kill('SIGINT');
    await new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)));
  }
  pg?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** `burrow serve` as a real process, with no secret of the test's own environment. */
function serve(args: string[]) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', ...args],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BURROW_API_KEY: '', BURROW_API_KEY_FILE: '', BURROW_DATABASE_URL: '' },
    },
  );
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, exited, stdout: () => out, stderr: () => err };
}

const read = (path: string) => {
  try {
    return readFileSync(path);
  } catch {
    return Buffer.alloc(0);
  }
};

/** Every process whose command line or environment holds `needle`. */
function processesHolding(needle: string): string[] {
  const hits: string[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const cmdline = read(`/proc/${pid}/cmdline`);
    if (cmdline.includes(needle)) hits.push(`${pid} cmdline: ${cmdline.toString()}`);
    if (read(`/proc/${pid}/environ`).includes(needle)) {
      hits.push(`${pid} environ: ${cmdline.toString()}`);
    }
  }
  return hits;
}

describe('the cluster database URL of burrow serve', () => {
  it('--cluster with a password is refused at start, naming --cluster-url-file and BURROW_DATABASE_URL', async () => {
    for (const url of [
      'postgres://u:pw-on-argv@127.0.0.1:1/x',
      'postgresql://u@127.0.0.1:1/x?sslmode=disable&password=pw-on-argv',
    ]) {
      const s = serve(['--data-dir', join(dir, 'refused'), '--cluster', url]);
      expect(await s.exited, s.stderr()).toBe(1);
      expect(s.stderr()).toMatch(/--cluster: the URL holds a password/);
      expect(s.stderr()).toContain('--cluster-url-file');
      expect(s.stderr()).toContain('BURROW_DATABASE_URL');
      expect(s.stderr()).not.toContain('pw-on-argv');
      expect(s.stdout()).not.toMatch(/listening/);
    }
  }, 60_000);

  it('--cluster-url-file: a node on a real PostgreSQL; the password in no command line, no child environment', async () => {
    // a role that must give its password (scram): the trust lines of the test server come after
    const password = `pw-${randomBytes(12).toString('hex')}`;
    const asPostgres = (args: string[]) =>
      execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: 'pipe' });
    asPostgres([
      '/usr/lib/postgresql/15/bin/psql',
      '-h',
      pg.dir,
      '-p',
      String(pg.port),
      '-U',
      'burrow',
      '-d',
      'postgres',
      '-c',
      `CREATE ROLE burrow_pw LOGIN SUPERUSER PASSWORD '${password}'`,
    ]);
    const hba = join(pg.dir, 'data', 'pg_hba.conf');
    writeFileSync(hba, `host all burrow_pw 127.0.0.1/32 scram-sha-256\n${readFileSync(hba)}`);
    asPostgres(['/usr/lib/postgresql/15/bin/pg_ctl', '-D', join(pg.dir, 'data'), 'reload']);

    const urlFile = join(dir, 'database-url');
    writeFileSync(urlFile, `postgres://burrow_pw:${password}@127.0.0.1:${pg.port}/postgres\n`, {
      mode: 0o600,
    });
    const key = `key-${randomBytes(12).toString('hex')}`;
    const keyFile = join(dir, 'api-key');
    writeFileSync(keyFile, key, { mode: 0o600 });
    const secretKeyFile = join(dir, 'secret-key');
    writeFileSync(secretKeyFile, randomBytes(32).toString('base64'), { mode: 0o600 });
    const s = serve([
      '--data-dir',
      join(dir, 'node'),
      '--api-key-file',
      keyFile,
      '--secret-key-file',
      secretKeyFile,
      '--cluster-url-file',
      urlFile,
      '--node-name',
      'url-file-node',
    ]);
    await eventually(
      () => /listening on http:\/\/127\.0\.0\.1:\d+/.test(s.stdout()) || s.child.exitCode !== null,
      'listening',
      60_000,
    );
    expect(s.child.exitCode, s.stderr()).toBeNull();
    const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(s.stdout())![1]!;
    // the node is in the cluster: its database took its row, through the password
    await eventually(
      async () => (await fetch(`${url}/readyz`)).status === 200,
      'the node to be ready',
      60_000,
    );
    const start = await fetch(`${url}/v1/start`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ instance_type: 'browser' }),
    });
    expect(start.status, await start.clone().text()).toBe(200);
    const nodes = execFileSync('runuser', [
      '-u',
      'postgres',
      '--',
      '/usr/lib/postgresql/15/bin/psql',
      '-h',
      pg.dir,
      '-p',
      String(pg.port),
      '-U',
      'burrow',
      '-d',
      'postgres',
      '-Atc',
      'SELECT name FROM burrow.nodes',
    ]).toString();
    expect(nodes).toContain('url-file-node');
    // every process on the host: no command line holds it, nor any environment
    expect(processesHolding(password)).toEqual([]);
  }, 180_000);
});
