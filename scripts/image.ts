/**
 * Builds burrow's image (Containerfile) with podman and runs it for real: starts the container,
 * waits for its HEALTHCHECK, then from outside the container starts a browser instance through
 * the HTTP API and drives it with playwright-core over its `cdp_url` to a page, and runs a command
 * in an ubuntu instance's bash; stops both, stops the container (SIGTERM through tini), removes it
 * and its volume. Prints the image's size and the times of each step. CI runs it (.ci/run).
 *
 *   node --import tsx scripts/image.ts [--base IMAGE] [--keep-image] [--no-build]
 *
 * `--keep-image` keeps the image it built (tagged localhost/burrow:check); `--no-build` runs that
 * one again when it is there.
 *
 * The base: `--base IMAGE` (or BURROW_IMAGE_BASE), e.g. docker.io/library/debian:trixie-slim
 * where a registry is reachable; else a Debian 13 root built here with mmdebstrap from
 * deb.debian.org and imported as `localhost/burrow-base:trixie-<hash of its inputs>` (kept, so
 * later runs reuse it). As root it installs podman, buildah and mmdebstrap with apt-get when they
 * are missing. It skips (exit 0, with the reason) only where podman cannot run a container at all;
 * any other failure exits 1.
 *
 * Podman here: Debian 12's podman runs containers only with `--runtime runc` (crun refuses this
 * kind of host's hybrid cgroups) and explicit `--ulimit nofile=…,nproc=…`, so every run and
 * build passes them.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { Burrow } from '../src/index.js';
import { parseRanges, rangeConflicts, spanOf } from '../src/server/sandbox/subid-ranges.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const argValue = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const keepImage = args.includes('--keep-image');
const noBuild = args.includes('--no-build');
const IMAGE = 'localhost/burrow:check';
const RUNTIME = ['--runtime', 'runc'];
/**
 * Explicit limits (podman with runc needs them here): open files up to this process's own hard
 * limit (a container cannot be given more), processes 32768 (root inside is not held by it; an
 * instance's uid is, besides its cgroup's pids limit).
 */
const ULIMITS = ((): string[] => {
  const limits = readFileSync('/proc/self/limits', 'utf8');
  const hard = Number(/^Max open files\s+\S+\s+(\d+)/m.exec(limits)?.[1] ?? 1024);
  const nofile = Math.min(hard, 65536);
  return ['--ulimit', `nofile=${nofile}:${nofile}`, '--ulimit', 'nproc=32768:32768'];
})();
/**
 * The two ways the image runs, each checked (docs/image.md, "Privileges", says why each flag):
 * its default user at the sandbox's unprivileged level, and root at the root level.
 */
const LEVELS = [
  {
    level: 'unprivileged',
    // no cgroup a normal user may write in a container: a server for others refuses instances
    // without limits unless the operator says so (docs/image.md, "Limits are required")
    flags: [
      '--security-opt',
      'seccomp=unconfined',
      '--security-opt',
      'systempaths=unconfined',
      '--env',
      'BURROW_ALLOW_UNLIMITED=1',
    ],
  },
  { level: 'root', flags: ['--user', 'root', '--privileged', '--cgroupns=private'] },
] as const;
/**
 * What doctor must find held inside the container at each level: at the unprivileged level all but
 * the cgroup limits (the container's cgroup file system is read-only to a normal user).
 */
const CORE = ['namespaces', 'seccomp', 'egress', 'devtools', 'chromium-sandbox'];
const HELD: Record<(typeof LEVELS)[number]['level'], readonly string[]> = {
  unprivileged: [...CORE, 'identity', 'rootfs', 'disk-quota'],
  root: [...CORE, 'identity', 'rootfs', 'disk-quota', 'limits'],
};
/** Inputs of the local base: a change to any of them builds a new one. */
const BASE_INPUTS = {
  suite: 'trixie',
  mirror: 'http://deb.debian.org/debian',
  variant: 'minbase',
  include: ['ca-certificates'],
};

const say = (line: string) => console.log(`image: ${line}`);
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * The image's subordinate range is no one's on this host: without a user namespace of the
 * container's own its ids are host uids, so a host user's range (or account) there would share
 * uids with the image's instances. Every line of the host's files counts, `burrow`'s too.
 */
function rangeFreeOnThisHost(): void {
  const inImage = (file: string) =>
    run('podman', ['run', '--rm', ...RUNTIME, ...ULIMITS, '--entrypoint', 'cat', IMAGE, file], {
      quiet: true,
    });
  const [uid] = parseRanges(inImage('/etc/subuid'));
  const [gid] = parseRanges(inImage('/etc/subgid'));
  if (!uid || !gid) fail("the image's /etc/subuid or /etc/subgid has no range");
  const host = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');
  const conflicts = rangeConflicts(
    { name: '', uid: -1 },
    { uid, gid },
    {
      subuid: host('/etc/subuid'),
      subgid: host('/etc/subgid'),
      passwd: host('/etc/passwd'),
      group: host('/etc/group'),
    },
  );
  if (conflicts.length > 0) fail(`the image's range is held on this host: ${conflicts.join('; ')}`);
  say(`subordinate range ${spanOf(uid)}: no user or account of this host holds it`);
}

/** Fails the check: thrown, so that the container and its volume are still removed. */
function fail(message: string): never {
  throw new Error(message);
}

function skip(reason: string): never {
  say(`SKIPPED: ${reason}`);
  process.exit(0);
}

function have(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

/** Runs a command and returns its stdout; fails the script (with its output) when it fails. */
function run(cmd: string, argv: string[], opts: { quiet?: boolean } = {}): string {
  const r = spawnSync(cmd, argv, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', opts.quiet ? 'pipe' : 'inherit'],
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) {
    fail(
      `${cmd} ${argv.join(' ')} exited ${r.status ?? r.signal}\n${r.stdout ?? ''}${r.stderr ?? ''}`,
    );
  }
  return r.stdout;
}

/** Runs a command with its output streamed (long builds show their progress). */
function stream(cmd: string, argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${argv[0]} exited ${code ?? signal}`)),
    );
  });
}

function installTools(): void {
  const missing = [
    ['podman', 'podman'],
    ['buildah', 'buildah'],
    ['mmdebstrap', 'mmdebstrap'],
    ['newuidmap', 'uidmap'],
    ['slirp4netns', 'slirp4netns'],
    ['fuse-overlayfs', 'fuse-overlayfs'],
    ['runc', 'runc'],
  ]
    .filter(([cmd]) => !have(cmd!))
    .map(([, pkg]) => pkg!);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    if (!have('podman'))
      skip(`podman is not installed (as root: apt-get install -y ${missing.join(' ')})`);
    return;
  }
  say(`installing ${missing.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const argv of [['update'], ['install', '-y', ...missing]]) {
    const r = spawnSync('apt-get', argv, { stdio: 'inherit', env });
    if (r.status !== 0) skip(`apt-get ${argv[0]} failed, so podman cannot be installed`);
  }
}

/** A Debian 13 base image: the one given, or one built with mmdebstrap and imported (cached). */
async function base(): Promise<string> {
  const given = argValue('--base') ?? process.env.BURROW_IMAGE_BASE;
  if (given) return given;
  const hash = createHash('sha256').update(JSON.stringify(BASE_INPUTS)).digest('hex').slice(0, 12);
  const tag = `localhost/burrow-base:${BASE_INPUTS.suite}-${hash}`;
  if (spawnSync('podman', ['image', 'exists', tag]).status === 0) {
    say(`base ${tag} (cached)`);
    return tag;
  }
  if (!have('mmdebstrap')) fail('mmdebstrap is missing: give --base IMAGE or install mmdebstrap');
  const dir = mkdtempSync(join(tmpdir(), 'burrow-base-'));
  try {
    const tar = join(dir, 'root.tar');
    const t0 = performance.now();
    say(`building the base: mmdebstrap ${BASE_INPUTS.suite} from ${BASE_INPUTS.mirror}`);
    await stream('mmdebstrap', [
      '--quiet',
      `--variant=${BASE_INPUTS.variant}`,
      `--include=${BASE_INPUTS.include.join(',')}`,
      '--format=tar',
      BASE_INPUTS.suite,
      tar,
      BASE_INPUTS.mirror,
    ]);
    run('podman', ['import', '--change', 'CMD ["/bin/bash"]', tar, tag], { quiet: true });
    say(`base ${tag} built in ${secs(performance.now() - t0)}`);
    return tag;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The build secret `npm_ca` (Containerfile): this machine's extra CA certificates, where a proxy
 * intercepts TLS to the npm registry and NODE_EXTRA_CA_CERTS names them. Nothing elsewhere.
 */
function npmCa(): string[] {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  return file && existsSync(file) ? ['--secret', `id=npm_ca,src=${file}`] : [];
}

/** A TCP port free on the host's loopback now (used on both sides of the port mapping). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const tAll = performance.now();
  installTools();
  if (!have('podman')) skip('podman is not installed and cannot be installed here');
  // can podman run a container at all? (the only reason to skip)
  const probe = spawnSync('podman', ['info', '--format', '{{.Host.OCIRuntime.Name}}'], {
    encoding: 'utf8',
  });
  if (probe.status !== 0) skip(`podman cannot run here: ${probe.stderr.trim()}`);

  let buildMs = 0;
  if (noBuild && spawnSync('podman', ['image', 'exists', IMAGE]).status === 0) {
    say(`using ${IMAGE} as built before (--no-build)`);
  } else {
    const baseImage = await base();
    const tBuild = performance.now();
    say(`building ${IMAGE} from ${baseImage}`);
    await stream('podman', [
      'build',
      '--format',
      'docker',
      ...RUNTIME,
      ...ULIMITS,
      '--build-arg',
      `BASE=${baseImage}`,
      ...npmCa(),
      '--tag',
      IMAGE,
      '--file',
      join(root, 'Containerfile'),
      root,
    ]);
    buildMs = performance.now() - tBuild;
  }
  const size = Number(
    run('podman', ['image', 'inspect', '--format', '{{.Size}}', IMAGE], { quiet: true }).trim(),
  );
  say(`${buildMs ? `built in ${secs(buildMs)}; ` : ''}image size ${(size / 1e6).toFixed(0)} MB`);

  try {
    rangeFreeOnThisHost();
    doctorWithoutFlags();
    for (const { level, flags } of LEVELS) await checkLevel(level, flags, { size, buildMs, tAll });
  } finally {
    if (!keepImage) spawnSync('podman', ['rmi', IMAGE], { stdio: 'ignore' });
  }
}

/**
 * The image run with none of the flags a level needs: `burrow doctor` must not call an instance
 * type ready (a container's default seccomp profile and masked /proc refuse what bubblewrap does)
 * and must name the flags that fix it.
 */
function doctorWithoutFlags(): void {
  // doctor exits 1 when no instance type can start: read its report whatever the status
  const r = spawnSync(
    'podman',
    ['run', '--rm', ...RUNTIME, ...ULIMITS, IMAGE, 'burrow', 'doctor', '--json'],
    { encoding: 'utf8' },
  );
  const out = r.stdout ?? '';
  if (!out.trim().startsWith('{')) fail(`doctor without the flags said: ${out}${r.stderr ?? ''}`);
  const doctor = JSON.parse(out) as {
    instance_types: Record<string, { ready: boolean }>;
    isolation: { name: string; status: string; fix?: string }[];
  };
  const ready = Object.entries(doctor.instance_types).filter(([, t]) => t.ready);
  if (ready.length > 0)
    fail(`doctor calls ${ready.map(([n]) => n).join(', ')} ready without the flags`);
  const ns = doctor.isolation.find((g) => g.name === 'namespaces');
  if (ns?.status !== 'missing' || !ns.fix?.includes('systempaths=unconfined'))
    fail(`doctor without the flags says of namespaces: ${JSON.stringify(ns)}`);
  say('without the flags: doctor calls no instance type ready and names the flags');
}

/**
 * Run the image at one sandbox level: healthy, the level the server found is that one, a browser
 * driven through its `cdp_url`, an ubuntu instance's bash, nothing live after the stops, and
 * SIGTERM through tini ends it with 0.
 */
async function checkLevel(
  level: (typeof LEVELS)[number]['level'],
  flags: readonly string[],
  { size, buildMs, tAll }: { size: number; buildMs: number; tAll: number },
): Promise<void> {
  say(`-- the ${level} level: podman run ${flags.join(' ')}`);
  const name = `burrow-check-${randomBytes(4).toString('hex')}`;
  const volume = `${name}-data`;
  const port = await freePort();
  const apiKey = randomBytes(24).toString('hex');
  const baseUrl = `http://127.0.0.1:${port}`;
  process.env.BURROW_API_KEY = apiKey; // what `--env BURROW_API_KEY` hands the container
  let started = false;
  try {
    const tRun = performance.now();
    // the key travels in podman's environment (`-e NAME` copies it), never in an argument
    run(
      'podman',
      [
        'run',
        '--detach',
        '--name',
        name,
        ...RUNTIME,
        ...ULIMITS,
        ...flags,
        '--publish',
        `127.0.0.1:${port}:${port}`,
        '--env',
        `BURROW_PORT=${port}`,
        '--env',
        'BURROW_API_KEY',
        '--volume',
        `${volume}:/var/lib/burrow`,
        IMAGE,
      ],
      { quiet: true },
    );
    started = true;
    // healthy: the image's own HEALTHCHECK passes (podman runs it on demand; no systemd timer needed)
    for (;;) {
      if (spawnSync('podman', ['healthcheck', 'run', name], { stdio: 'ignore' }).status === 0)
        break;
      const state = run('podman', ['inspect', '--format', '{{.State.Status}}', name], {
        quiet: true,
      }).trim();
      if (state !== 'running') fail(`the container is ${state} before it was healthy`);
      if (performance.now() - tRun > 180_000) fail('not healthy within 180 s');
      await sleep(200);
    }
    const healthyMs = performance.now() - tRun;
    say(`podman run → healthy: ${secs(healthyMs)}`);
    // the server found the level these flags are for (it prints it at start)
    const startLog = spawnSync('podman', ['logs', name], { encoding: 'utf8' });
    const found = /privilege level: ([\w-]+)/.exec(startLog.stdout + startLog.stderr)?.[1];
    if (found !== level) fail(`the server found the ${found ?? 'unknown'} level, not ${level}`);

    // what doctor finds inside: every guarantee the level promises in docs/image.md is held
    // (a host uid per instance too, at both levels: newuidmap/newgidmap's file capabilities)
    const doctor = JSON.parse(
      run('podman', ['exec', name, 'burrow', 'doctor', '--json'], { quiet: true }),
    ) as { level: string; isolation: { name: string; status: string }[] };
    const held = new Set(doctor.isolation.filter((g) => g.status === 'held').map((g) => g.name));
    const expected = HELD[level].filter((g) => !held.has(g));
    if (doctor.level !== level || expected.length > 0) {
      fail(`doctor in the ${level} container: ${JSON.stringify(doctor.isolation)}`);
    }
    say(`doctor: ${[...held].join(', ')} held`);
    // no way up for the server's user: no setuid or setgid program in the image
    const setid = run(
      'podman',
      ['exec', '--user', 'root', name, 'find', '/', '-xdev', '-type', 'f', '-perm', '/6000'],
      { quiet: true },
    ).trim();
    if (setid) fail(`setuid or setgid programs in the image: ${setid.replace(/\n/g, ', ')}`);

    const burrow = new Burrow({ baseUrl, apiKey });
    const version = await burrow.meta.version();
    say(`server ${JSON.stringify(version)}`);

    // a browser instance, driven from here through its cdp_url
    const tBrowser = performance.now();
    const box = await burrow.instances.start({ instance_type: 'browser' });
    const startMs = performance.now() - tBrowser;
    try {
      const { cdp_url: cdpUrl } = await burrow.browser.cdpUrl(box.id);
      if (!cdpUrl.startsWith(`ws://127.0.0.1:${port}/`))
        fail(`cdp_url ${cdpUrl} is not this server's`);
      const browser = await chromium.connectOverCDP(cdpUrl);
      try {
        const page = browser.contexts()[0]?.pages()[0] ?? (await browser.contexts()[0]!.newPage());
        await page.goto(
          'data:text/html,<title>from the image</title><h1 id=h>burrow in a container</h1>',
        );
        const title = await page.title();
        const h1 = await page.locator('#h').textContent();
        if (title !== 'from the image' || h1 !== 'burrow in a container') {
          fail(`the page says ${JSON.stringify({ title, h1 })}`);
        }
        const ua = await page.evaluate(() => navigator.userAgent);
        say(
          `browser ${box.id}: start ${secs(startMs)}, start → page ${secs(performance.now() - tBrowser)} (${ua.match(/Chrome\/[\d.]+/)?.[0] ?? ua})`,
        );
      } finally {
        await browser.close().catch(() => {});
      }
    } finally {
      await burrow.instances.stop(box.id);
    }

    // a second one: what the first paid once (the disk of the first instance, Chromium's first
    // start in the container) against what each start costs
    const tSecond = performance.now();
    const second = await burrow.instances.start({ instance_type: 'browser' });
    const secondMs = performance.now() - tSecond;
    await burrow.instances.stop(second.id);
    say(`second browser instance: start ${secs(secondMs)}`);

    // an ubuntu instance's bash
    const tUbuntu = performance.now();
    const ubuntu = await burrow.instances.start({ instance_type: 'ubuntu' });
    try {
      const res = await burrow.instance.bash(ubuntu.id, {
        command: 'echo "uid=$(id -u) $(uname -s)"; python3 -c "print(6*7)"',
      });
      const out = res.output?.trim() ?? '';
      if (!/^uid=\d+ Linux\n42$/.test(out)) fail(`ubuntu bash said ${JSON.stringify(res)}`);
      // seen from the container: the instance's shell runs as a uid of its own, not the server's
      const owners = run(
        'podman',
        ['exec', name, 'sh', '-c', 'for s in /proc/[0-9]*/status; do grep -s "^Uid:" "$s"; done'],
        { quiet: true },
      );
      const uids = new Set([...owners.matchAll(/^Uid:\s+(\d+)/gm)].map((m) => Number(m[1])));
      const server = level === 'root' ? 0 : 10001;
      const own = [...uids].filter((u) => u !== server && u !== 0);
      if (own.length === 0)
        fail(`no process in the container runs as an instance's own uid: ${[...uids].join(', ')}`);
      say(`instance uids seen from the container: ${own.join(', ')} (the server is ${server})`);
      say(
        `ubuntu ${ubuntu.id}: start → bash output ${secs(performance.now() - tUbuntu)}: ${JSON.stringify(out)}`,
      );
    } finally {
      await burrow.instances.stop(ubuntu.id);
    }
    const listed = await burrow.instances.list();
    const live = listed.filter((i) => i.status !== 'terminated');
    if (live.length > 0) fail(`instances still live after stop: ${JSON.stringify(live)}`);

    // SIGTERM through tini: the server stops its instances and exits 0 well within podman's grace
    const tStop = performance.now();
    run('podman', ['stop', '--time', '30', name], { quiet: true });
    const code = run('podman', ['inspect', '--format', '{{.State.ExitCode}}', name], {
      quiet: true,
    }).trim();
    if (code !== '0') fail(`the server exited ${code} on SIGTERM`);
    say(`podman stop → exited 0 in ${secs(performance.now() - tStop)}`);
    say(
      `summary (${level}): image ${(size / 1e6).toFixed(0)} MB, build ${secs(buildMs)}, run → healthy ${secs(healthyMs)}, first browser start ${secs(startMs)}, second ${secs(secondMs)}, whole check ${secs(performance.now() - tAll)}`,
    );
  } catch (err) {
    if (started) {
      const logs = spawnSync('podman', ['logs', '--tail', '60', name], { encoding: 'utf8' });
      console.error(`image: the container's last log lines:\n${logs.stdout}${logs.stderr}`);
    }
    throw err;
  } finally {
    spawnSync('podman', ['rm', '--force', '--time', '10', name], { stdio: 'ignore' });
    spawnSync('podman', ['volume', 'rm', '--force', volume], { stdio: 'ignore' });
  }
}

try {
  await main();
} catch (err) {
  console.error(`image: FAILED: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
