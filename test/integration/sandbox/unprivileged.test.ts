/**
 * burrow run by a normal user, and by root in a simulated unprivileged container; and the
 * descriptors a spawn chain could leak into an instance at every level.
 *
 * A normal user (`burrow-ci`, created here idempotently; this file runs as root) runs
 * test/helpers/as-user.ts from this checkout: the embedded default with no flag, an ubuntu
 * instance's bash and the attacks that apply at that level: first without a subordinate range
 * (every instance runs as the user's own uid, each in its own user namespace: the guarantee
 * table says so), then with one in /etc/subuid and /etc/subgid (each instance a host uid of its
 * own from it, which a process escaped from every namespace but its user one still has: it cannot
 * signal or read the other instance or the server). The user's ranges are set here and put back
 * as they were at the end. Attacks that do not apply: cgroup escapes and freezer tricks (there
 * are no cgroups), the disk quota's loop device (the disk is a tmpfs in the instance's own mount
 * namespace).
 *
 * The simulated container is root in a mount namespace whose cgroupfs is read-only, with
 * CAP_SYS_ADMIN dropped from every capability set (capsh): what `docker run` without
 * `--privileged` leaves.
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
import { testServer, type TestServer } from '../../helpers/server.js';

const USER = 'burrow-ci';
/** The test user's subordinate uid and gid range in the cases that give it one. */
const SUB_START = 2_000_000;
const SUB_COUNT = 65_536;
const SUB_FILES = ['/etc/subuid', '/etc/subgid'];
/** The two files as they were before this file changed them. */
const subFiles = new Map<string, string>();

/** Give the test user the range `SUB_START:SUB_COUNT`, or none: its other lines go either way. */
function subordinateRange(present: boolean): void {
  for (const file of SUB_FILES) {
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const others = text.split('\n').filter((l) => l && !l.startsWith(`${USER}:`));
    if (present) others.push(`${USER}:${SUB_START}:${SUB_COUNT}`);
    writeFileSync(file, others.map((l) => `${l}\n`).join(''));
  }
}
/**
 * Runs `fn` with `line` (another user's range) added to /etc/subuid and /etc/subgid, then puts
 * both back as they were.
 */
async function withOtherRange<T>(line: string, fn: () => Promise<T>): Promise<T> {
  const before = SUB_FILES.map((f) => [f, readFileSync(f, 'utf8')] as const);
  for (const [file, text] of before) writeFileSync(file, `${text}${line}\n`);
  try {
    return await fn();
  } finally {
    for (const [file, text] of before) writeFileSync(file, text);
  }
}

/**
 * The range doctor's `usermod` fix gives (the same for uids and gids), checked against every
 * line of /etc/subuid and /etc/subgid, every uid of /etc/passwd and gid of /etc/group as they
 * are when it is called: the range, and what it overlaps.
 */
function suggested(fix: string | undefined): { start: number; end: number; overlaps: string[] } {
  const m = /--add-subuids (\d+)-(\d+) --add-subgids \1-\2 burrow-ci\b/.exec(fix ?? '');
  expect(m, fix).not.toBeNull();
  const [start, end] = [Number(m![1]), Number(m![2])];
  const overlaps: string[] = [];
  for (const file of SUB_FILES) {
    for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
      const [, s, c] = line.split(':').map(Number);
      if (s! <= end && start < s! + c!) overlaps.push(`${file}: ${line}`);
    }
  }
  for (const file of ['/etc/passwd', '/etc/group']) {
    for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
      const id = Number(line.split(':')[2]);
      if (id >= start && id <= end) overlaps.push(`${file}: ${line}`);
    }
  }
  return { start, end, overlaps };
}

let home: string;
let uid: number;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * How long one cold start of `node --import tsx` takes on this machine now (ms), measured once
 * when this file loads: every case starts one or more, and what they start after it (a server,
 * instances, Chromium) goes at the same pace, so each case's time budget is scaled by it.
 */
const COLD_START_MS = await (async () => {
  const began = performance.now();
  execFileSync(process.execPath, ['--import', 'tsx', '-e', '0'], { stdio: 'ignore' });
  return performance.now() - began;
})();
/** A case's time budget: a minute, and a hundred and twenty cold starts at today's pace. */
const CASE_MS = 60_000 + 120 * COLD_START_MS;

/** Runs `argv`; killed (its output kept for the failure) shortly before its case's budget ends. */
function run(
  argv: string[],
  env: Record<string, string> = {},
  timeoutMs = CASE_MS - 5_000,
): Promise<Run> {
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: root,
    env: { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + String(d)).slice(-20_000)));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((done) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    }),
  );
}

/**
 * Where the normal user sees this checkout: a bind mount of it, in a mount namespace of the
 * command's own, at a path every user can traverse (a CI clone may sit under a directory only
 * root may enter, such as /root; its files themselves are readable).
 */
let view: string;

/** `node --import tsx <args>` as the normal user, with a home and a data dir of its own. */
const asUser = (args: string[], env: Record<string, string> = {}) =>
  run([
    'unshare',
    '--mount',
    '--propagation',
    'private',
    '--',
    'sh',
    '-c',
    'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec "$@"',
    'sh',
    root,
    view,
    'runuser',
    '-u',
    USER,
    '--',
    'env',
    `HOME=${home}`,
    `BURROW_DATA_DIR=${join(home, 'data')}`,
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    process.execPath,
    '--import',
    'tsx',
    ...args,
  ]);

interface Guarantee {
  name: string;
  status: 'held' | 'missing';
  core: boolean;
  why?: string;
  fix?: string;
}
interface Doctor {
  level: string;
  isolation: Guarantee[];
  instance_types: { browser: { ready: boolean }; ubuntu: { ready: boolean } };
}
const table = (d: Doctor) => Object.fromEntries(d.isolation.map((g) => [g.name, g.status]));

/** Every namespace descriptor held by any process an instance can see (`/proc/N/fd`). */
const NS_FDS_ANYWHERE =
  'for d in /proc/[0-9]*/fd/*; do l=$(readlink "$d" 2>/dev/null) && echo "$d $l"; done | grep -E "(user|pid|net|mnt|ipc|uts|cgroup|time):\\[" || true';

/** Lets go of /etc/subuid and /etc/subgid (test/helpers/host-id-files.ts). */
let releaseIdFiles = () => {};

beforeAll(async () => {
  releaseIdFiles = await lockHostIdFiles();
  ensureUser(USER);
  uid = Number(execFileSync('id', ['-u', USER]).toString().trim());
  // useradd may have given the user a range already: the first cases run without one
  for (const file of SUB_FILES)
    subFiles.set(file, existsSync(file) ? readFileSync(file, 'utf8') : '');
  subordinateRange(false);
  view = mkdtempSync(join(tmpdir(), 'burrow-ci-src-'));
  chmodSync(view, 0o755);
  home = mkdtempSync(join(tmpdir(), 'burrow-ci-'));
  chmodSync(home, 0o700);
  chownSync(home, uid, uid);
  // a file of the host's /tmp the instances must not see
  writeFileSync('/tmp/bci-host-marker', 'host');
}, 16 * 60_000); // the other file that changes them may hold the lock for minutes

afterAll(() => {
  for (const [file, text] of subFiles) writeFileSync(file, text);
  releaseIdFiles();
  rmSync(home, { recursive: true, force: true });
  if (view) rmSync(view, { recursive: true, force: true });
  rmSync('/tmp/bci-host-marker', { force: true });
});

describe('as a normal user', { timeout: CASE_MS }, () => {
  it('doctor --json: the unprivileged level and its guarantee table, each found by trying', async () => {
    const r = await asUser(['src/cli/main.ts', 'doctor', '--json']);
    const doctor = JSON.parse(r.stdout) as Doctor;
    expect(doctor.level).toBe('unprivileged');
    expect(table(doctor)).toEqual({
      namespaces: 'held',
      identity: 'missing',
      seccomp: 'held',
      rootfs: 'held',
      // this machine has cgroup v1 controllers for root only, and no delegated v2 subtree
      limits: 'missing',
      'disk-quota': 'held',
      egress: 'held',
      devtools: 'held',
      'chromium-sandbox': 'held',
    });
    const by = Object.fromEntries(doctor.isolation.map((g) => [g.name, g]));
    expect(by.identity!.why).toMatch(new RegExp(`run as its uid \\(${uid}\\)`));
    expect(by.identity!.why).toMatch(/no range in \/etc\/subuid/);
    expect(by.identity!.fix).toMatch(/usermod --add-subuids .* --add-subgids .* burrow-ci/);
    expect(by.identity!.core).toBe(false);
    expect(by.limits!.why).toMatch(/cannot write its cgroup.*delegated/);
    expect(by.limits!.fix).toMatch(/Delegate=yes/);
    expect(doctor.instance_types.browser.ready).toBe(true);
    expect(doctor.instance_types.ubuntu.ready).toBe(true);
  });

  it("doctor --json suggests a range that no other user's range, account or group touches", async () => {
    // another user holds the range useradd hands out first (what doctor used to suggest)
    await withOtherRange('burrow-other:100000:131072', async () => {
      const r = await asUser(['src/cli/main.ts', 'doctor', '--json']);
      const identity = (JSON.parse(r.stdout) as Doctor).isolation.find(
        (g) => g.name === 'identity',
      )!;
      expect(identity.status).toBe('missing');
      const range = suggested(identity.fix);
      expect(range.end - range.start + 1).toBe(65_536);
      expect(range.start).toBeGreaterThan(65_535);
      expect(range.overlaps).toEqual([]);
    });
  });

  it('the embedded default with no flag, an ubuntu bash, and the attacks that apply', async () => {
    const r = await asUser(['test/helpers/as-user.ts'], { OPENS: '3' });
    const line = r.stdout.trim().split('\n').pop() ?? '';
    const f = JSON.parse(line) as Record<string, string | number[] | Record<string, unknown>>;
    expect(f.error, r.stderr).toBeUndefined();
    expect(f.uid).toBe(uid);
    // the bridge: a page in an isolated browser of a server run by the user
    expect(f.title).toBe('local page');
    // the embedded default opens the host's loopback on purpose (a test suite's own pages)
    expect(f.hostPage).toMatch(/^loaded 200 .*host secret/);
    expect(f.browserLimits).toMatchObject({ memory_bytes: null, disk_bytes: 4 * 1024 ** 3 });
    // downloads and recordings are read out of the tmpfs disk through the anchor's mount namespace
    expect(f.download).toBe('same bytes');
    expect(f.recording).toBe('completed');
    expect(f.downloadAfterStop).toBe('same bytes');
    console.log(`openSession as a normal user (warm server), ms: ${String(f.opens)}`);
    // a browser's teardown leaves nothing to the host's init (Chromium ends before its wrapper)
    expect(f.zombiesOfHostInit).toBe(0);
    console.log(`teardown after the last session's stop: ${String(f.teardownMs)} ms`);
    // the ubuntu instance: bash as the instance's user, its own host name
    expect(f.bash).toBe('hello from user 1000\nburrow\n');
    // no descriptor it was not given (the namespace ones of the chain included), none enterable
    expect(f.fds).toMatch(/^0 1 2 3 \n/);
    expect(f.fds).not.toMatch(/(user|pid|net|mnt|ipc|uts|cgroup):\[/);
    expect(f.setns).toBe('done\n');
    expect(f.nsFdsAnywhere).toBe('');
    // not the host's /tmp, no host directories
    expect(f.hostTmp).toContain("cannot access '/tmp/bci-host-marker'");
    expect(f.hostTmp).not.toMatch(/^root$|^srv$|^work$/m);
    // its own pid namespace: a few small numbers, nothing of the other instance or the host
    const procs = (f.procs as string).trim().split(' ');
    expect(procs.length, "a few processes, not the host's hundreds").toBeLessThan(40);
    expect(procs).toContain('1');
    expect(f.seeOther).not.toContain('sleep 300');
    // without a subordinate range both instances run as the user's uid (identity: missing)
    expect(f.hostUids).toEqual([[uid], [uid]]);
    // seccomp and no capabilities
    expect(f.unshare).toMatch(/Operation not permitted\nexit 1/);
    expect(f.mount).toMatch(/exit 32/);
    expect(f.ptrace).toBe('ptrace=-1 errno=1\n');
    // the host's port is not on the instance's loopback, and the egress refuses blocked domains
    expect(f.hostPort).toMatch(/Failed to connect to 127\.0\.0\.1/);
    expect(f.blocked).toBe('403');
    // burrow's own API port, even through the egress of a server that opens the host loopback
    expect(f.apiPort).toBe('403');
    // the disk quota: a tmpfs of the quota's size
    expect(f.quota).toBe('4294967296 /home/user\n4294967296 /tmp\n');
    expect(f.upload).toBe('uploaded bytes\nuser\n');
    // no freezer without cgroups: pause says which guarantee is missing
    expect(f.pause).toMatchObject({ status: 503 });
    expect((f.pause as { message: string }).message).toMatch(/'limits' isolation guarantee/);
  });
});

describe(
  'as a normal user with a subordinate range in /etc/subuid and /etc/subgid',
  { timeout: CASE_MS },
  () => {
    beforeAll(() => subordinateRange(true));
    afterAll(() => subordinateRange(false));

    it('doctor says identity held, naming the range, found by mapping a uid of it', async () => {
      expect(existsSync('/usr/bin/newuidmap'), 'uidmap is installed (scripts/setup.sh)').toBe(true);
      const r = await asUser(['src/cli/main.ts', 'doctor', '--json']);
      const doctor = JSON.parse(r.stdout) as Doctor;
      expect(doctor.level).toBe('unprivileged');
      const identity = doctor.isolation.find((g) => g.name === 'identity')!;
      expect(identity.status, identity.why).toBe('held');
      expect(identity.why).toContain(`subordinate range in /etc/subuid (${SUB_START}:${SUB_COUNT}`);
      // the rest as without a range
      expect(table(doctor)).toMatchObject({
        namespaces: 'held',
        'disk-quota': 'held',
        egress: 'held',
      });
    });

    it("doctor says identity missing when another user's range overlaps the server's, and suggests one of its own", async () => {
      await withOtherRange(`burrow-other:${SUB_START + 100}:10`, async () => {
        const r = await asUser(['src/cli/main.ts', 'doctor', '--json']);
        const doctor = JSON.parse(r.stdout) as Doctor;
        const identity = doctor.isolation.find((g) => g.name === 'identity')!;
        expect(identity.status).toBe('missing');
        expect(identity.why).toContain(
          `is not its own: it overlaps burrow-other's range ${SUB_START + 100}:10 in /etc/subuid`,
        );
        expect(identity.why).toContain(`instances run as the server's uid (${uid})`);
        expect(identity.fix).toContain(
          `--del-subuids ${SUB_START}-${SUB_START + SUB_COUNT - 1} --del-subgids ${SUB_START}-${SUB_START + SUB_COUNT - 1}`,
        );
        // the suggestion overlaps nothing, the server user's own present range included
        const range = suggested(identity.fix);
        expect(range.overlaps).toEqual([]);
        expect(range.start).toBeGreaterThan(65_535);
      });
    });

    it('each instance runs as a host uid of its own from the range; one escaped from its namespaces reaches neither the other instance nor the server', async () => {
      const r = await asUser(['test/helpers/as-user.ts'], { OPENS: '1', ESCAPE: '1' });
      const f = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as Record<string, unknown>;
      expect(f.error, r.stderr).toBeUndefined();
      // what the server reads and writes on the instances' disks works through its view of them
      expect(f.title).toBe('local page');
      expect(f.download).toBe('same bytes');
      expect(f.recording).toBe('completed');
      expect(f.downloadAfterStop).toBe('same bytes');
      expect(f.bash).toBe('hello from user 1000\nburrow\n');
      expect(f.quota).toBe('4294967296 /home/user\n4294967296 /tmp\n');
      expect(f.upload).toBe('uploaded bytes\nuser\n');
      expect(f.fds).toMatch(/^0 1 2 3 \n/);
      expect(f.nsFdsAnywhere).toBe('');
      expect(f.seeOther).not.toContain('sleep 300');
      // seen from the host (/proc/PID/status): every process of an instance has its one uid, the
      // two differ, both in the range, neither the server's
      const [mine, theirs] = f.hostUids as number[][];
      expect(mine).toHaveLength(1);
      expect(theirs).toHaveLength(1);
      for (const u of [mine![0]!, theirs![0]!]) {
        expect(u).toBeGreaterThanOrEqual(SUB_START);
        expect(u).toBeLessThan(SUB_START + SUB_COUNT);
        expect(u).not.toBe(uid);
      }
      expect(mine![0]).not.toBe(theirs![0]);
      // as that uid in the host's pid and mount namespaces: no signal to the other instance's pid 1
      // (kill or pidfd) or the server, no reading its environment or files, nor the user's home
      expect(f.escaped).toBe(
        'kill other 1\nkill server 1\npidfd other -1 1\nenviron other 1\nfiles other 2\nserver home 2\n',
      );
    });
  },
);

describe(
  'a simulated unprivileged container (root, no CAP_SYS_ADMIN, read-only cgroupfs)',
  { timeout: CASE_MS },
  () => {
    /** `argv` as root in a mount namespace with cgroupfs read-only and CAP_SYS_ADMIN gone. */
    const contained = (argv: string[]) =>
      run([
        'unshare',
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
        '-c',
        'mount -o remount,bind,ro /sys/fs/cgroup && for d in /sys/fs/cgroup/*/; do mount -o remount,bind,ro "$d" 2>/dev/null; done; exec capsh --drop=cap_sys_admin -- -c \'exec "$@"\' capsh "$@"',
        'contained',
        ...argv,
      ]);

    it('doctor tells the truth: container-root, no limits, the core guarantees hold', async () => {
      const r = await contained([
        process.execPath,
        '--import',
        'tsx',
        'src/cli/main.ts',
        'doctor',
        '--json',
      ]);
      const doctor = JSON.parse(r.stdout) as Doctor;
      expect(doctor.level).toBe('container-root');
      const t = table(doctor);
      expect(t.limits).toBe('missing');
      for (const core of ['namespaces', 'seccomp', 'egress', 'devtools', 'chromium-sandbox']) {
        expect(t[core], core).toBe('held');
      }
      expect(t.identity).toBe('held');
      expect(t['disk-quota']).toBe('missing');
      const limits = doctor.isolation.find((g) => g.name === 'limits')!;
      expect(limits.why).toMatch(/read-only/);
    });

    it('instances start with what holds: no limits or quota, the rest as at the root level', async () => {
      const r = await contained([
        'env',
        `HOME=${home}`,
        `BURROW_DATA_DIR=${join(home, 'contained')}`,
        'OPENS=1',
        process.execPath,
        '--import',
        'tsx',
        'test/helpers/as-user.ts',
      ]);
      const f = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as Record<string, unknown>;
      expect(f.error, r.stderr).toBeUndefined();
      expect(f.uid).toBe(0);
      expect(f.title).toBe('local page');
      expect(f.download).toBe('same bytes');
      expect(f.recording).toBe('completed');
      expect(f.downloadAfterStop).toBe('same bytes');
      expect(f.limits).toEqual({ memory_bytes: null, pids: null, cpus: null, disk_bytes: null });
      expect(f.bash).toBe('hello from user 1000\nburrow\n');
      expect(f.fds).toMatch(/^0 1 2 3 \n/);
      expect(f.setns).toBe('done\n');
      expect(f.hostTmp).toContain("cannot access '/tmp/bci-host-marker'");
      expect(f.unshare).toMatch(/exit 1/);
      expect(f.ptrace).toBe('ptrace=-1 errno=1\n');
      expect(f.blocked).toBe('403');
      expect(f.apiPort).toBe('403');
      expect(f.pause).toMatchObject({ status: 503 });
    });
  },
);

describe('at the root level', { timeout: CASE_MS }, () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await testServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it("an instance's command sees no descriptor it was not given, and can enter none", async () => {
    const start = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
    const { id } = (await start.json()) as { id: string };
    const bash = async (command: string) => {
      const res = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout: 60 } });
      const body = (await res.json()) as { output?: string; error?: string };
      return `${body.output ?? ''}${body.error ?? ''}`;
    };
    const fds = await bash(
      'ls /proc/self/fd | tr "\\n" " "; echo; for f in /proc/self/fd/*; do readlink $f; done',
    );
    expect(fds).toMatch(/^0 1 2 3 \n/);
    expect(fds).not.toMatch(/(user|pid|net|mnt|ipc|uts|cgroup):\[/);
    const setns = await bash(
      `perl -e 'my $n = \`uname -m\` =~ /aarch64/ ? 268 : 308; opendir(my $d, "/proc/self/fd"); for my $f (grep { /^\\d+$/ && $_ > 2 } readdir $d) { my $r = syscall($n, 0 + $f, 0); print "fd $f setns=$r\\n" if $r == 0 }; print "done\\n"'`,
    );
    expect(setns).toBe('done\n');
    // nor does any process of the instance (Xvfb, the toolbox, …): their descriptors are the
    // instance's to take, by /proc/N/fd
    expect(await bash(NS_FDS_ANYWHERE)).toBe('');
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  });
});
