/**
 * Attacks on instance isolation, made the way an attacker would: with only the API (code run by
 * an ubuntu instance's bash) or only a `cdp_url`. Each asserts the attack is refused and that the
 * host shows no trace of it. src/server/sandbox/ISOLATION.md is the threat model these check.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, testServer, type TestServer } from '../../helpers/server.js';

const MiB = 1024 * 1024;
/** curl through the egress even for loopback addresses (NO_PROXY lists the instance's own). */
const PROXY = "--noproxy '' -x http://127.0.0.1:3128";
/** The instances' CPU cgroups (cgroup v1, as on the machines this suite runs on). */
const CPU_CGROUPS = '/sys/fs/cgroup/cpu/burrow';
/** The largest weight cgroup v1 gives (`cpu.shares`). */
const MOST_SHARES = 262_144;

/** Writes each cgroup file's value; the function returned puts the values back. */
function weigh(values: Record<string, number>): () => void {
  const old = Object.keys(values).map((path) => [path, readFileSync(path, 'utf8').trim()]);
  for (const [path, value] of Object.entries(values)) writeFileSync(path, String(value));
  return () => {
    for (const [path, value] of old) writeFileSync(path!, value!);
  };
}

/**
 * A process spinning on the host in the cgroup `dir` until `stop()`: it notes its CPU time against
 * the monotonic clock (the one the instance reads too) every few milliseconds, so that what it got
 * in a window measured inside is known.
 */
const SPIN_OUTSIDE = `
import json, signal, sys, time
samples = []
def stop(*_):
    sys.stdout.write(json.dumps(samples) + "\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
sys.stdout.write("spinning\\n")
sys.stdout.flush()
last = 0
while True:
    now = time.monotonic()
    if now - last >= 0.005:
        samples.append((now, time.thread_time()))
        last = now
`;

async function spinOutside(dir: string) {
  const child = spawn('python3', ['-c', SPIN_OUTSIDE], { stdio: ['ignore', 'pipe', 'inherit'] });
  writeFileSync(join(dir, 'cgroup.procs'), String(child.pid));
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  await eventually(() => text.startsWith('spinning'), 'the spinner outside', 30_000);
  let samples: Promise<[number, number][]> | undefined;
  /** Its samples, once it stopped. */
  const stop = () =>
    (samples ??= (async () => {
      const closed = once(child, 'close');
      child.kill('SIGTERM');
      await closed;
      return JSON.parse(text.split('\n')[1]!) as [number, number][];
    })());
  return {
    stop,
    /** The cores it got between two readings of the monotonic clock (seconds). */
    async coresIn(from: number, to: number) {
      const all = await stop();
      const start = all.findLast(([t]) => t <= from);
      const end = all.find(([t]) => t >= to);
      if (!start || !end) throw new Error(`the spinner did not span ${from}-${to}`);
      return (end[1] - start[1]) / (end[0] - start[0]);
    },
  };
}

let server: TestServer;
let site: Server;
let allowedPort: number;
let closedPort: number;

/** A page on the host's loopback; `allowedPort` is allowed by the operator, `closedPort` not. */
async function listen(): Promise<[Server, number]> {
  const s = createServer((req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(`<title>host page</title><p id="p">host ${req.headers.host ?? ''}</p>`);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return [s, (s.address() as AddressInfo).port];
}

const api = async (path: string, json?: unknown) => {
  const res = await server.api(path, json === undefined ? { method: 'POST' } : { json });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

async function start(type: 'ubuntu' | 'browser'): Promise<string> {
  const r = await api('/v1/start', { instance_type: type, resolution: [800, 600] });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.id as string;
}

/** Run `command` in the instance's bash; the output and the error text. */
async function sh(id: string, command: string, timeout = 30): Promise<string> {
  const r = await api(`/v1/instance/${id}/bash`, { command, timeout });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return `${(r.body.output as string | undefined) ?? ''}${(r.body.error as string | undefined) ?? ''}`;
}

let closedSite: Server;

beforeAll(async () => {
  [site, allowedPort] = await listen();
  [closedSite, closedPort] = await listen();
  server = await testServer({
    maxInstances: 6,
    isolation: {
      allowHostPorts: [allowedPort],
      memoryBytes: 512 * MiB,
      pids: 512,
      cpus: 1.25,
      diskBytes: 96 * MiB,
    },
  });
});

afterAll(async () => {
  await server?.close();
  site?.close();
  closedSite?.close();
});

describe('an ubuntu instance attacking from its shell', () => {
  let a: string;
  let b: string;
  beforeAll(async () => {
    [a, b] = await Promise.all([start('ubuntu'), start('ubuntu')]);
  });
  afterAll(async () => {
    for (const id of [a, b]) if (id) await api(`/v1/instance/${id}/stop`);
  });

  it('is not host root: its own uid inside, an unprivileged host uid outside, no capabilities', async () => {
    const out = await sh(a, 'id -u; grep -E "^Cap(Eff|Prm|Bnd):" /proc/self/status; sleep 7771 &');
    expect(out).toMatch(/^1000\n/);
    expect(out).toMatch(/CapEff:\s+0+\n/);
    expect(out).toMatch(/CapBnd:\s+0+\n/);
    const pid = execFileSync('pgrep', ['-f', '^sleep 7771$'], { encoding: 'utf8' }).trim();
    const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    expect(uid).toBeGreaterThan(65535);
  });

  it("cannot write the host's kernel settings (/proc/sys)", async () => {
    const before = readFileSync('/proc/sys/kernel/core_pattern', 'utf8');
    try {
      const out = await sh(
        a,
        "echo '|/tmp/pwn %p' > /proc/sys/kernel/core_pattern; echo 1 > /proc/sys/vm/drop_caches; echo rc=$?",
      );
      expect(out).toMatch(/Permission denied|Read-only file system/);
      expect(readFileSync('/proc/sys/kernel/core_pattern', 'utf8')).toBe(before);
    } finally {
      // on a server without the defence the attack works: put the host back as it was
      if (readFileSync('/proc/sys/kernel/core_pattern', 'utf8') !== before) {
        writeFileSync('/proc/sys/kernel/core_pattern', before);
      }
    }
  });

  it('lives in namespaces of its own (user, mount, pid, network, IPC, UTS)', async () => {
    const out = await sh(
      a,
      'for n in user mnt pid net ipc uts; do echo "$n $(readlink /proc/self/ns/$n)"; done; hostname; ls /proc | grep -c "^[0-9]"',
    );
    for (const ns of ['user', 'mnt', 'pid', 'net', 'ipc', 'uts']) {
      const inside = new RegExp(`^${ns} (\\S+)$`, 'm').exec(out)?.[1];
      expect(inside, ns).toBeDefined();
      expect(inside).not.toBe(readlinkSync(`/proc/self/ns/${ns}`));
    }
    expect(out).toMatch(/^burrow$/m);
    // it sees its own few processes, not the host's hundreds
    expect(Number(out.trim().split('\n').pop())).toBeLessThan(40);
  });

  it('is refused by the seccomp filter: keyring, kernel modules, mount in a nested namespace, ptrace', async () => {
    const py = [
      'import ctypes, os',
      'libc = ctypes.CDLL(None, use_errno=True)',
      // x86_64 numbers: keyctl, add_key, init_module, ptrace(PTRACE_ATTACH, 1)
      'for name, nr, args in [("keyctl", 250, (0, 0, 0, 0)), ("add_key", 248, (0, 0, 0, 0)), ("init_module", 175, (0, 0, 0)), ("ptrace", 101, (16, 1, 0, 0))]:',
      '    r = libc.syscall(nr, *args)',
      '    print(name, r, os.strerror(ctypes.get_errno()))',
    ].join('\n');
    const out = await sh(
      a,
      // a directory that exists in there; unshare must not make propagation private (a mount)
      `python3 -c '${py}'; mkdir -p /tmp/mnt; unshare -rm --propagation=unchanged sh -c 'mount -t tmpfs none /tmp/mnt && echo MOUNTED'; grep Seccomp: /proc/self/status`,
    );
    for (const name of ['keyctl', 'add_key', 'init_module', 'ptrace']) {
      expect(out).toMatch(new RegExp(`^${name} -1 Operation not permitted$`, 'm'));
    }
    expect(out).not.toContain('MOUNTED');
    expect(out).toMatch(/Seccomp:\s+2/);
  });

  it("sees its own root file system: no host secrets, data dir, /root, other users' homes", async () => {
    mkdirSync(join(server.dataDir, 'auth-states'), { recursive: true });
    writeFileSync(join(server.dataDir, 'auth-states', 'planted.json'), '{"secret":"s3cret"}');
    const out = await sh(
      a,
      [
        'cat /etc/shadow',
        'ls -A /root',
        'ls -A /home',
        'ls -A /var/lib',
        'ls /etc/ssh /etc/ssl/private',
        `cat ${server.dataDir}/auth-states/planted.json`,
        `ls ${join(server.dataDir, 'instances')}`,
        'cut -d: -f1 /etc/passwd | tr "\\n" " "',
        'touch /usr/pwn /etc/pwn',
        'echo end',
      ].join('; '),
    );
    expect(out).toMatch(/\/etc\/shadow: No such file or directory/);
    expect(out).toMatch(/\/root': No such file or directory/);
    expect(out).not.toContain('s3cret');
    expect(out).toMatch(/^user\n/m); // /home holds only the instance's user
    expect(out).toContain('root user nobody ');
    expect(out).toMatch(/touch: cannot touch '\/usr\/pwn': Read-only file system/);
    expect(existsSync('/usr/pwn')).toBe(false);
    expect(existsSync('/etc/pwn')).toBe(false);
  });

  it('reports its limits and is held to them: disk quota (ENOSPC), process count, memory', async () => {
    const info = (await (await server.api(`/v1/instance/${a}`)).json()) as {
      limits: Record<string, number>;
    };
    expect(info.limits).toEqual({
      memory_bytes: 512 * MiB,
      pids: 512,
      cpus: 1.25,
      disk_bytes: 96 * MiB,
    });
    const disk = await sh(a, 'dd if=/dev/zero of=~/fill bs=1M count=200 2>&1; rm -f ~/fill');
    expect(disk).toMatch(/No space left on device/);
    // a fork bomb stops at the limit (the children exit by themselves after 3 s)
    const bomb = [
      'import os, time',
      'n = 0',
      'for i in range(2000):',
      '    try:',
      '        pid = os.fork()',
      '    except OSError:',
      '        break',
      '    if pid == 0:',
      '        time.sleep(3)',
      '        os._exit(0)',
      '    n += 1',
      'print("started", n)',
    ].join('\n');
    const forks = await sh(b, `python3 -c '${bomb}'; sleep 4`);
    const started = Number(/started (\d+)/.exec(forks)?.[1]);
    expect(started).toBeGreaterThan(100);
    expect(started).toBeLessThan(512);
    const mem = await sh(
      b,
      'python3 -c "b = bytearray(1200 * 1024 * 1024); print(\\"ALLOCATED\\")"; echo rc=$?',
    );
    expect(mem).not.toMatch(/^ALLOCATED$/m);
    expect(mem).toMatch(/rc=137/); // killed by the memory limit
    expect(await sh(b, 'echo still-alive')).toContain('still-alive'); // the instance survives
  });

  it('is held to its CPU limit: two spinning processes get 1.25 cores, plus at most one burst', async () => {
    const group = execFileSync('sh', ['-c', `ls -d ${CPU_CGROUPS}/*.${b}`], {
      encoding: 'utf8',
    }).trim();
    const cpuStat = () => {
      const text = readFileSync(join(group, 'cpu.stat'), 'utf8');
      const n = (key: string) => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      return { throttled: n('nr_throttled'), throttledNs: n('throttled_time') };
    };
    // an instance may spend one period's unused quota at once (Chromium's start is a burst)
    expect(Number(readFileSync(join(group, 'cpu.cfs_burst_us'), 'utf8'))).toBe(125_000);
    // The quota can only be seen holding an instance back when the machine would give it more:
    // on a busy one (other tests, other work) two spinners got less than 1.25 cores and were
    // never throttled. So for this window the instance's cgroups outweigh everything else on the
    // machine (cpu.shares, not its quota, which is what is checked), and a spinner outside the
    // instance, weighted below it and above everything else, takes what the instance leaves: the
    // CPU it did not get was there to take.
    const reference = join(CPU_CGROUPS, `reference-${process.pid}`);
    mkdirSync(reference);
    const restore = weigh({
      [join(CPU_CGROUPS, 'cpu.shares')]: MOST_SHARES,
      [join(group, 'cpu.shares')]: MOST_SHARES,
      [join(reference, 'cpu.shares')]: MOST_SHARES / 4,
    });
    let outside: Awaited<ReturnType<typeof spinOutside>> | undefined;
    try {
      outside = await spinOutside(reference);
      const before = cpuStat();
      const spin = [
        'import os, time',
        'def spin():',
        '    end = time.time() + 2',
        '    while time.time() < end: pass',
        'kids = []',
        'began = time.monotonic()',
        'for _ in range(2):',
        '    pid = os.fork()',
        '    if pid == 0:',
        '        spin()',
        '        os._exit(0)',
        '    kids.append(pid)',
        'for pid in kids: os.waitpid(pid, 0)',
        't = os.times()',
        'print("cpu", t.children_user + t.children_system)',
        'print("window", began, time.monotonic())',
      ].join('\n');
      const out = await sh(b, `python3 -c '${spin}'`);
      const cpu = Number(/cpu ([\d.]+)/.exec(out)?.[1]);
      const after = cpuStat();
      const [from, to] = /window ([\d.]+) ([\d.]+)/.exec(out)!.slice(1).map(Number);
      const ref = await outside.coresIn(from!, to!);
      // 2 s at 1.25 cores, one period's quota of burst (0.125 s), and slack for the kernel's
      // per-CPU slices and the start of the processes
      expect(cpu).toBeGreaterThan(0.5);
      expect(cpu).toBeLessThan(2 * 1.25 + 0.125 + 0.45);
      // the kernel held it back: throttled in some periods
      expect(after.throttled).toBeGreaterThan(before.throttled);
      expect(after.throttledNs).toBeGreaterThan(before.throttledNs);
      // while the spinner outside, weighted below the instance, ran beside it on what was left
      expect(ref, 'cores the spinner outside got in the same window').toBeGreaterThan(0.2);
    } finally {
      await outside?.stop();
      restore();
      rmdirSync(reference); // a cgroup's directory goes with rmdir, once its processes did
    }
  });

  it("reaches neither the API, nor the host's loopback, nor another instance; only what the egress allows", async () => {
    const apiPort = new URL(server.url).port;
    await sh(b, 'nohup python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1');
    const out = await sh(
      a,
      [
        // straight to the host (no proxy): there is no route
        `curl -sS -m 3 --noproxy '*' http://127.0.0.1:${apiPort}/v1/instances; echo " direct-api=$?"`,
        `curl -sS -m 3 --noproxy '*' http://127.0.0.1:${allowedPort}/; echo " direct-site=$?"`,
        // through the egress (loopback is the instance's own unless asked for through the proxy):
        // the API and a port the operator did not allow are refused
        `curl -s -o /dev/null -w "%{http_code}" -m 5 ${PROXY} http://127.0.0.1:${apiPort}/v1/instances; echo " proxy-api"`,
        `curl -s -o /dev/null -w "%{http_code}" -m 5 ${PROXY} http://127.0.0.1:${closedPort}/; echo " proxy-closed"`,
        `curl -s -m 5 ${PROXY} http://127.0.0.1:${allowedPort}/; echo " proxy-allowed"`,
        // the other instance's server is on *its* loopback, not this one's
        `curl -sS -m 3 --noproxy '*' http://127.0.0.1:8765/; echo " other-instance=$?"`,
      ].join('; '),
    );
    expect(out).toMatch(/ direct-api=7/);
    expect(out).toMatch(/ direct-site=7/);
    expect(out).toMatch(/403 proxy-api/);
    expect(out).toMatch(/403 proxy-closed/);
    expect(out).toMatch(/host 127\.0\.0\.1:\d+<\/p> proxy-allowed/);
    expect(out).toMatch(/ other-instance=7/);
    // and the other instance does serve it on its own loopback
    expect(await sh(b, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8765/")).toBe(
      '200',
    );
  });

  it('does not share SysV shared memory with another instance', async () => {
    const made = await sh(a, 'ipcmk -M 4096');
    const shmid = /Shared memory id: (\d+)/.exec(made)?.[1];
    expect(shmid).toBeDefined();
    expect(await sh(a, 'ipcs -m')).toContain(shmid!);
    const other = await sh(b, 'ipcs -m');
    expect(other).not.toMatch(new RegExp(`^0x[0-9a-f]+ ${shmid} `, 'm'));
  });

  it("runs the desktop Chromium as the instance's user, with Chromium's own sandbox", async () => {
    const r = await api(`/v1/instance/${a}/browser/start`, {});
    expect(r.status).toBe(200);
    const out = await sh(
      a,
      'ps -eo user,args | grep "[c]hromium --type=renderer" | head -1; ps -eo args | grep -c "[-]-no-sandbox"',
    );
    expect(out).toMatch(/^user /);
    expect(out.trim().split('\n').pop()).toBe('0');
  });
});

describe('blocked_domains at the egress, for every process of an ubuntu instance', () => {
  it('refuses a blocked host by CONNECT target and by Host header', async () => {
    const r = await api('/v1/start', {
      instance_type: 'ubuntu',
      blocked_domains: ['blocked.test'],
    });
    const id = r.body.id as string;
    try {
      const out = await sh(
        id,
        [
          'curl -s -o /dev/null -w "%{http_code}" -m 5 https://www.blocked.test/; echo " connect"',
          `curl -s -o /dev/null -w "%{http_code}" -m 5 ${PROXY} -H "Host: blocked.test" http://127.0.0.1:${allowedPort}/; echo " host-header"`,
          `curl -s -m 5 ${PROXY} http://127.0.0.1:${allowedPort}/; echo " allowed"`,
        ].join('; '),
      );
      expect(out).toMatch(/(403|000) connect/); // curl prints 000 when the CONNECT is refused
      expect(out).toMatch(/403 host-header/);
      expect(out).toMatch(/host 127\.0\.0\.1:\d+<\/p> allowed/);
    } finally {
      await api(`/v1/instance/${id}/stop`);
    }
  });
});

describe('whoever holds a browser instance cdp_url', () => {
  let id: string;
  let cdpUrl: string;
  beforeAll(async () => {
    id = await start('browser');
    const res = await server.api(`/v1/instance/${id}/browser/cdp_url`);
    cdpUrl = ((await res.json()) as { cdp_url: string }).cdp_url;
  });
  afterAll(async () => {
    if (id) await api(`/v1/instance/${id}/stop`);
  });

  it("reads only the instance's own files with file://", async () => {
    writeFileSync(join(server.dataDir, 'planted-secret.txt'), 's3cret-data-dir');
    const browser = await chromium.connectOverCDP(cdpUrl);
    try {
      const page = await browser.contexts()[0]!.newPage();
      const read = async (url: string) =>
        page.goto(url).then(
          async () => (await page.textContent('body')) ?? '',
          (err: Error) => `ERR ${err.message.split('\n')[0]}`,
        );
      expect(await read('file:///etc/shadow')).toMatch(/ERR .*ERR_FILE_NOT_FOUND/);
      expect(await read(`file://${server.dataDir}/planted-secret.txt`)).toMatch(/^ERR /);
      expect(await read('file:///etc/passwd')).not.toMatch(/^(?!root|user|nobody).+:x:/m);
    } finally {
      await browser.close();
    }
  });

  it('cannot make Chromium write host files with Browser.setDownloadBehavior', async () => {
    const target = `/etc/burrow-download-${Date.now()}`;
    mkdirSync(join(server.dataDir, 'dl'), { recursive: true });
    const browser = await chromium.connectOverCDP(cdpUrl);
    try {
      const cdp = await browser.newBrowserCDPSession();
      for (const path of [target, join(server.dataDir, 'dl')]) {
        await cdp
          .send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: path })
          .catch(() => undefined);
        const page = await browser.contexts()[0]!.newPage();
        await page.setContent('<a id="a" download="pwned.txt" href="data:text/plain,owned">x</a>');
        await page.click('#a').catch(() => undefined);
        await new Promise((r) => setTimeout(r, 1500));
        await page.close();
      }
    } finally {
      await browser.close();
    }
    const landed = existsSync(target);
    if (landed) rmSync(target, { recursive: true, force: true }); // undo a successful attack
    expect(landed).toBe(false);
    expect(existsSync(join(server.dataDir, 'dl', 'pwned.txt'))).toBe(false);
  });

  it("runs Chromium as an unprivileged host uid with Chromium's own sandbox, and no DevTools port", async () => {
    // this instance's processes: its cgroup lists them
    const procs = execFileSync(
      'sh',
      ['-c', `cat /sys/fs/cgroup/pids/burrow/*.${id}/cgroup.procs`],
      {
        encoding: 'utf8',
      },
    )
      .split('\n')
      .filter(Boolean);
    const ours = procs.filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/exe`) === '/usr/lib/chromium/chromium';
      } catch {
        return false;
      }
    });
    expect(ours.length).toBeGreaterThan(0);
    for (const pid of ours) {
      let status: string;
      let cmdline: string;
      try {
        status = readFileSync(`/proc/${pid}/status`, 'utf8');
        cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        continue; // exited meanwhile
      }
      expect(Number(/^Uid:\s+(\d+)/m.exec(status)![1])).toBeGreaterThan(65535);
      expect(cmdline).not.toContain('--no-sandbox');
      expect(cmdline).not.toContain('--remote-debugging-port');
    }
  });

  it("reaches the host's loopback only on ports the operator allowed, never the API", async () => {
    const browser = await chromium.connectOverCDP(cdpUrl);
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`http://127.0.0.1:${allowedPort}/`);
      expect(await page.textContent('#p')).toContain('host');
      const apiRes = await page.goto(`${server.url}/v1/instances`).catch(() => null);
      expect(apiRes === null || apiRes.status() === 403).toBe(true);
      const closed = await page.goto(`http://127.0.0.1:${closedPort}/`).catch(() => null);
      expect(closed === null || closed.status() === 403).toBe(true);
      // a context with a proxy of its own would send its traffic around the egress: refused
      const ctx = await browser
        .newContext({ proxy: { server: `http://127.0.0.1:${closedPort}` } })
        .catch((err: Error) => err);
      expect(ctx).toBeInstanceOf(Error);
      expect((ctx as Error).message).toMatch(/proxy/i);
    } finally {
      await browser.close();
    }
  });
});

describe('the disk quota on the host', () => {
  it("keeps an instance's disk image within its quota on the host disk", async () => {
    const id = await start('ubuntu');
    try {
      await sh(id, 'dd if=/dev/urandom of=~/big bs=1M count=300 2>/dev/null; sync; true', 60);
      const image = execFileSync('sh', ['-c', `ls -d /var/lib/burrow/sandboxes/*/${id}/disk.img`], {
        encoding: 'utf8',
      }).trim();
      const used = statSync(image).blocks * 512;
      expect(used).toBeLessThanOrEqual(96 * MiB);
      expect(used).toBeGreaterThan(32 * MiB); // it did write, up to the quota
    } finally {
      await api(`/v1/instance/${id}/stop`);
    }
  });
});
