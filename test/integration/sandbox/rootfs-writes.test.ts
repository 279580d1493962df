/**
 * `/` inside an instance is read-only, so its disk (and its quota) holds everything it writes.
 * bubblewrap's root and /dev are tmpfs mounts the size of half the host's memory, owned by the
 * instance's user unless made read-only. An ubuntu instance's shell tries to write outside its
 * disk and more than its quota into every place it may write, at the root level (this process's
 * server), on servers a normal user runs (test/helpers/as-user-rootfs.ts as `burrow-ci`, without
 * and with a subordinate range: its lines in /etc/subuid and /etc/subgid are put back as they
 * were at the end) and in a simulated container (root without CAP_SYS_ADMIN, no quota); the
 * host's shared memory, where tmpfs pages are counted, is read while the instance holds what it
 * wrote. A browser instance has no shell, and its `cdp_url` holder cannot choose where downloads
 * land (chromium/downloads.ts): its Chromium's own mounts are read from the host instead.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureUser } from '../../helpers/normal-user.js';
import { lockHostIdFiles } from '../../helpers/host-id-files.js';
import { root } from '../../e2e/run.js';
import {
  attackRootfs,
  OUTSIDE,
  writableMounts,
  type RootfsFindings,
} from '../../helpers/rootfs-attack.js';
import { testServer, type TestServer } from '../../helpers/server.js';

const MiB = 2 ** 20;
/** The instances' disk quota here, and what each write tries: twice that. */
const QUOTA = 64 * MiB;
const ATTEMPT = 2 * QUOTA;
/** What else on this shared machine may add to the host's shared memory meanwhile. */
const SHMEM_NOISE = 64 * MiB;

/** What every finding must show, at any level. */
function expectConfined(f: RootfsFindings, diskShmem: number): void {
  for (const path of OUTSIDE) {
    expect(f.outside[path], path).toMatch(/Read-only file system|Permission denied/);
  }
  // the only writable file systems are the instance's disk, seen at its three directories
  expect(Object.keys(f.writableMounts).sort()).toEqual(['/dev/shm', '/home/user', '/tmp']);
  expect(new Set(Object.values(f.writableMounts)).size).toBe(1);
  expect(f.fills).toEqual({
    '/home/user': 'full',
    '/tmp': 'full',
    '/var/tmp': 'full',
    '/dev/shm': 'full',
  });
  expect(f.diskUsed).toBeLessThanOrEqual(QUOTA);
  expect(f.diskUsed).toBeGreaterThan(QUOTA / 2); // it did write, up to the quota
  // the host holds no more of it in memory than its disk does there (a tmpfs disk) or nothing
  expect(f.shmemGrowth).toBeLessThan(diskShmem + SHMEM_NOISE);
}

describe('at the root level', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await testServer({ isolation: { diskBytes: QUOTA } });
  });
  afterAll(async () => {
    await server?.close();
  });

  const start = async (type: 'ubuntu' | 'browser') => {
    const res = await server.api('/v1/start', { json: { instance_type: type } });
    const body = (await res.json()) as { id: string };
    expect(res.status, JSON.stringify(body)).toBe(200);
    return body.id;
  };

  it("an ubuntu instance's shell writes only to its disk, and no more than its quota", async () => {
    const id = await start('ubuntu');
    try {
      const f = await attackRootfs(async (command, timeout = 30) => {
        const res = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout } });
        const body = (await res.json()) as { output?: string; error?: string };
        expect(res.status, JSON.stringify(body)).toBe(200);
        return `${body.output ?? ''}${body.error ?? ''}`;
      }, ATTEMPT);
      // the disk is a loop-mounted ext4 image here: none of it is shared memory
      expectConfined(f, 0);
    } finally {
      await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    }
  });

  it("a browser instance's Chromium (a page that took it over) has only its disk to write to", async () => {
    const id = await start('browser');
    try {
      // its browser process, found in the instance's cgroup (cgroup v1 here, as in CI)
      const procs = execFileSync(
        'sh',
        ['-c', `cat /sys/fs/cgroup/pids/burrow/*.${id}/cgroup.procs`],
        {
          encoding: 'utf8',
        },
      )
        .split('\n')
        .filter(Boolean);
      const browser = procs.find((pid) => {
        try {
          const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
          return argv[0]?.endsWith('/chromium') && !argv.some((a) => a.startsWith('--type='));
        } catch {
          return false;
        }
      });
      expect(browser, procs.join(' ')).toBeDefined();
      const mounts = writableMounts(readFileSync(`/proc/${browser}/mountinfo`, 'utf8'));
      expect(Object.keys(mounts).sort()).toEqual(['/dev/shm', '/home/user', '/tmp']);
      expect(new Set(Object.values(mounts)).size).toBe(1);
      // not even the host's root writes there (a read-only mount holds for every uid)
      for (const path of ['/x', '/run/x', '/dev/x']) {
        let wrote = true;
        try {
          writeFileSync(`/proc/${browser}/root${path}`, 'x');
        } catch (err) {
          wrote = false;
          expect((err as NodeJS.ErrnoException).code, path).toBe('EROFS');
        }
        expect(wrote, path).toBe(false);
      }
    } finally {
      await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    }
  });
});

const USER = 'burrow-ci';
/** The test user's subordinate range where a case gives it one (unprivileged.test.ts's too). */
const SUB_RANGE = `${USER}:2000000:65536`;
const SUB_FILES = ['/etc/subuid', '/etc/subgid'];
const subFiles = new Map<string, string>();

/** Give the test user the range `SUB_RANGE`, or none: the other users' lines stay. */
function subordinateRange(present: boolean): void {
  for (const file of SUB_FILES) {
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const others = text.split('\n').filter((l) => l && !l.startsWith(`${USER}:`));
    if (present) others.push(SUB_RANGE);
    writeFileSync(file, others.map((l) => `${l}\n`).join(''));
  }
}

describe('at the other levels', { timeout: 180_000 }, () => {
  let home: string;
  let view: string;
  /** Lets go of /etc/subuid and /etc/subgid (test/helpers/host-id-files.ts). */
  let releaseIdFiles = () => {};
  beforeAll(async () => {
    releaseIdFiles = await lockHostIdFiles();
    ensureUser(USER);
    const uid = Number(execFileSync('id', ['-u', USER]).toString().trim());
    for (const file of SUB_FILES) {
      subFiles.set(file, existsSync(file) ? readFileSync(file, 'utf8') : '');
    }
    home = mkdtempSync(join(tmpdir(), 'burrow-ci-rootfs-'));
    chmodSync(home, 0o700);
    chownSync(home, uid, uid);
    view = mkdtempSync(join(tmpdir(), 'burrow-ci-src-'));
    chmodSync(view, 0o755);
  }, 16 * 60_000); // unprivileged.test.ts may hold the lock for minutes
  afterAll(() => {
    for (const [file, text] of subFiles) writeFileSync(file, text);
    releaseIdFiles();
    if (home) rmSync(home, { recursive: true, force: true });
    if (view) rmSync(view, { recursive: true, force: true });
  });

  /**
   * test/helpers/as-user-rootfs.ts with `env`, its findings: in a mount namespace of its own where
   * this checkout is seen at a path every user can traverse (a bind mount), after `prefix` (the
   * user, or the simulated container).
   */
  async function attack(prefix: string[], env: string[]) {
    const child = spawn(
      'unshare',
      [
        ...['--mount', '--propagation', 'private', '--', 'sh', '-c'],
        'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec "$@"',
        ...['sh', root, view, ...prefix, 'env', `HOME=${home}`, ...env],
        ...[process.execPath, '--import', 'tsx', 'test/helpers/as-user-rootfs.ts'],
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + String(d)).slice(-20_000)));
    const code = await new Promise<number | null>((done) => child.on('close', done));
    expect(code, stderr).toBe(0);
    const f = JSON.parse(stdout.trim().split('\n').pop() ?? '') as RootfsFindings & {
      uid: number;
      error?: string;
    };
    expect(f.error, stderr).toBeUndefined();
    return f;
  }

  const asUser = (dataDir: string) =>
    attack(
      ['runuser', '-u', USER, '--'],
      [`BURROW_DATA_DIR=${join(home, dataDir)}`, `QUOTA=${QUOTA}`, `ATTEMPT=${ATTEMPT}`],
    );

  it("a normal user's server (the user-namespace chain): only its disk, no more than its quota", async () => {
    subordinateRange(false);
    const f = await asUser('userns');
    expect(f.uid).not.toBe(0);
    // the disk is a tmpfs of the quota's size there: the quota's bytes are shared memory
    expectConfined(f, QUOTA);
  });

  it('with a subordinate range (an instance a host uid of its own): the same', async () => {
    subordinateRange(true);
    const f = await asUser('subids');
    expect(f.uid).not.toBe(0);
    expectConfined(f, QUOTA);
  });

  it('root in a container without CAP_SYS_ADMIN (no quota there): nothing outside its disk', async () => {
    // what `docker run` without --privileged leaves: a read-only cgroupfs, CAP_SYS_ADMIN dropped
    const contained = [
      'sh',
      '-c',
      'mount -o remount,bind,ro /sys/fs/cgroup && for d in /sys/fs/cgroup/*/; do mount -o remount,bind,ro "$d" 2>/dev/null; done; exec capsh --drop=cap_sys_admin -- -c \'exec "$@"\' capsh "$@"',
      'contained',
    ];
    const f = await attack(contained, [
      `BURROW_DATA_DIR=${join(home, 'contained')}`,
      `ATTEMPT=${MiB}`,
    ]);
    expect(f.uid).toBe(0);
    for (const path of OUTSIDE) {
      expect(f.outside[path], path).toMatch(/Read-only file system|Permission denied/);
    }
    expect(Object.keys(f.writableMounts).sort()).toEqual(['/dev/shm', '/home/user', '/tmp']);
  });
});
