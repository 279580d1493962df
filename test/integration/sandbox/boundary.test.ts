/**
 * The boundary between the root server and an instance, walked from the host: every process of
 * an instance is confined like the commands it runs, the root side of its spawn chains sees none
 * of the instance's variables and passes on none of the server's descriptors, and its disk is
 * root's alone on the host. Each attack is made the way an attacker would: from the instance's
 * shell, with a `cdp_url`, or as another local user. ISOLATION.md ("The boundary") lists the
 * channels these check.
 */
import { execFileSync, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

const server = useServer();

async function call(s: { url: string; apiKey: string }, path: string, json?: unknown) {
  const res = await fetch(s.url + path, {
    method: 'POST',
    headers: { 'x-api-key': s.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify(json ?? {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function start(s: { url: string; apiKey: string }, type: 'ubuntu' | 'browser') {
  const r = await call(s, '/v1/start', { instance_type: type, resolution: [800, 600] });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { id: string };
}

async function sh(s: { url: string; apiKey: string }, id: string, command: string) {
  const r = await call(s, `/v1/instance/${id}/bash`, { command, timeout: 30 });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return `${(r.body.output as string | undefined) ?? ''}${(r.body.error as string | undefined) ?? ''}`;
}

interface Proc {
  pid: number;
  comm: string;
  status: Record<string, string>;
}

/** Every host process in the instance's cgroup (its wrappers on the host side included). */
function instanceProcesses(id: string): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!pid) continue;
    try {
      if (!readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(`.${id}`)) continue;
      const status: Record<string, string> = {};
      for (const line of readFileSync(`/proc/${pid}/status`, 'utf8').split('\n')) {
        const at = line.indexOf(':');
        if (at > 0) status[line.slice(0, at)] = line.slice(at + 1).trim();
      }
      out.push({ pid, comm: status.Name ?? '', status });
    } catch {
      /* exited while listed */
    }
  }
  return out;
}

const hostRoot = statSync('/');
const ownUserns = readlinkSync('/proc/self/ns/user');

function describeProc(p: Proc): string {
  let cmd = '';
  try {
    cmd = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').replaceAll('\0', ' ').slice(0, 120);
  } catch {
    /* gone */
  }
  return `${p.pid} ${p.comm} (${cmd})`;
}

describe('every process of an instance', () => {
  it('is confined: inside, its own root, seccomp, no_new_privs, no capability; outside, only bubblewrap as the instance uid with a fixed environment', async () => {
    const { id } = await start(server, 'ubuntu');
    try {
      const marker = `BURROW_MARK_${randomBytes(4).toString('hex')}`;
      const set = await call(server, `/v1/instance/${id}/env`, { variables: { [marker]: 'x' } });
      expect(set.status).toBe(200);
      // wake every kind of process an ubuntu instance runs: bash, the display and its VNC
      // server, the kernel, the file tools, the desktop browser
      expect(await sh(server, id, `echo $${marker}`)).toContain('x');
      const shot = await call(server, `/v1/instance/${id}/computer`, { action: 'take_screenshot' });
      expect(shot.status, JSON.stringify(shot.body)).toBe(200);
      const code = await call(server, `/v1/instance/${id}/code/execute`, { code: '1+1' });
      expect(code.status, JSON.stringify(code.body)).toBe(200);
      const file = await call(server, `/v1/instance/${id}/file`, {
        command: 'write',
        path: '/home/user/a.txt',
        content: 'a',
      });
      expect(file.status, JSON.stringify(file.body)).toBeLessThan(500);
      const browser = await call(server, `/v1/instance/${id}/browser/start`, {});
      expect(browser.status, JSON.stringify(browser.body)).toBe(200);

      const procs = instanceProcesses(id);
      const inside = procs.filter((p) => p.status.NSpid!.split(/\s+/).length > 1);
      const outside = procs.filter((p) => p.status.NSpid!.split(/\s+/).length === 1);
      const names = new Set(inside.map((p) => p.comm));
      for (const want of ['sh', 'bash', 'Xvfb', 'python3', 'chromium']) {
        expect(names, `no ${want} among ${[...names].join(', ')}`).toContain(want);
      }
      const uid = Number(inside.find((p) => p.comm === 'bash')!.status.Uid!.split(/\s+/)[0]);
      expect(uid).toBeGreaterThan(65535);

      for (const p of inside) {
        const what = describeProc(p);
        expect(p.status.Seccomp, what).toBe('2');
        expect(p.status.NoNewPrivs, what).toBe('1');
        expect(p.status.Uid!.split(/\s+/).map(Number), what).toEqual([uid, uid, uid, uid]);
        let root: ReturnType<typeof statSync>;
        try {
          root = statSync(`/proc/${p.pid}/root/`);
        } catch {
          continue; // exited
        }
        expect(root.ino === hostRoot.ino && root.dev === hostRoot.dev, `${what}: host root`).toBe(
          false,
        );
        const userns = readlinkSync(`/proc/${p.pid}/ns/user`);
        expect(userns, what).not.toBe(ownUserns);
        // Chromium's own sandbox nests user namespaces of its own, where its processes hold
        // capabilities over nothing but themselves; in the instance's namespace, none
        if (userns === readlinkSync(`/proc/${inside[0]!.pid}/ns/user`) || p.comm !== 'chromium') {
          if (p.comm !== 'chromium') {
            expect(p.status.CapEff, what).toBe('0000000000000000');
            expect(p.status.CapPrm, what).toBe('0000000000000000');
            expect(p.status.CapBnd, what).toBe('0000000000000000');
          }
        }
      }
      // pid 1 of the instance is one of the confined: its parent is on the host side
      const init = inside.find((p) => p.status.NSpid!.split(/\s+/)[1] === '1');
      expect(init, 'pid 1 among the instance processes').toBeDefined();
      expect(init!.comm).toBe('sh');

      for (const p of outside) {
        const what = describeProc(p);
        // the host side of a chain is only ever bubblewrap, as the instance's uid
        expect(p.comm, what).toBe('bwrap');
        expect(p.status.Uid!.split(/\s+/).map(Number), what).toEqual([uid, uid, uid, uid]);
        const env = readFileSync(`/proc/${p.pid}/environ`, 'utf8');
        expect(env, what).not.toContain(marker);
        expect(env.split('\0').filter(Boolean), what).toEqual([
          'PATH=/usr/sbin:/usr/bin:/sbin:/bin',
        ]);
      }
      expect(outside.length).toBeGreaterThan(0);
    } finally {
      await call(server, `/v1/instance/${id}/stop`);
    }
  });
});

describe("an instance's pid 1, attacked from inside", () => {
  let id: string;
  const name = `burrow-host-mark-${randomBytes(4).toString('hex')}`;
  beforeAll(async () => {
    writeFileSync(join('/tmp', name), 'host secret');
    id = (await start(server, 'ubuntu')).id;
  });
  afterAll(async () => {
    rmSync(join('/tmp', name), { force: true });
    if (id) await call(server, `/v1/instance/${id}/stop`);
  });

  it('is as confined as the shell, and its root is not the host', async () => {
    const out = await sh(
      server,
      id,
      [
        'grep -E "^(Seccomp|NoNewPrivs|CapEff):" /proc/1/status',
        `cat /proc/1/root/tmp/${name} 2>&1 || echo no-host-tmp`,
        'echo VIEW: $(ls /proc/1/root/ 2>&1)',
        `cat /proc/1/root/proc/${process.pid}/cmdline 2>&1 || echo no-host-proc`,
      ].join('; '),
    );
    expect(out).toMatch(/Seccomp:\s+2/);
    expect(out).toMatch(/NoNewPrivs:\s+1/);
    expect(out).toMatch(/CapEff:\s+0{16}/);
    expect(out).not.toContain('host secret');
    expect(out).toContain('no-host-tmp');
    expect(out).toContain('no-host-proc');
    // the host's top-level directories are not in pid 1's view
    const view = /VIEW:(.*)/.exec(out)?.[1] ?? '';
    expect(view).toMatch(/\busr\b/);
    expect(view).not.toMatch(/\b(root|var|srv|opt|home|etc)\b/);
  });

  it('gives nothing a page or a cdp_url holder can read through file://', async () => {
    const b = await start(server, 'browser');
    const res = await server.api(`/v1/instance/${b.id}/browser/cdp_url`);
    const { cdp_url } = (await res.json()) as { cdp_url: string };
    const browser = await chromium.connectOverCDP(cdp_url);
    try {
      const page = await browser.contexts()[0]!.newPage();
      const text = await page
        .goto(`file:///proc/1/root/tmp/${name}`)
        .then(() => page.textContent('body'))
        .catch((err: Error) => err.message);
      expect(text).not.toContain('host secret');
    } finally {
      await browser.close().catch(() => {});
      await call(server, `/v1/instance/${b.id}/stop`);
    }
  });
});

describe("the instance's environment", () => {
  it('reaches its commands, never the root side of the spawn chain (LD_DEBUG_OUTPUT from the env API writes no host file)', async () => {
    const { id } = await start(server, 'ubuntu');
    const prefix = `burrow-ld-${randomBytes(4).toString('hex')}`;
    const hostFiles = () => readdirSync('/tmp').filter((f) => f.startsWith(prefix));
    try {
      const set = await call(server, `/v1/instance/${id}/env`, {
        variables: { LD_DEBUG: 'files', LD_DEBUG_OUTPUT: `/tmp/${prefix}` },
      });
      expect(set.status).toBe(200);
      // a fresh bash session is a fresh spawn through the chain, with the new environment
      const r = await call(server, `/v1/instance/${id}/bash`, { restart: true });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const inside = await sh(server, id, `ls /tmp | grep -c ${prefix}`);
      expect(Number(inside.trim())).toBeGreaterThan(0); // the command did get them
      expect(hostFiles()).toEqual([]);
    } finally {
      for (const f of hostFiles()) rmSync(join('/tmp', f), { force: true });
      await call(server, `/v1/instance/${id}/stop`);
    }
  });
});

describe("an instance's disk on the host", () => {
  it("is root's alone: another local user can neither list its home nor write to its /tmp", async () => {
    const { id } = await start(server, 'ubuntu');
    try {
      await sh(server, id, 'echo private > ~/diary.txt');
      const roots = readdirSync('/var/lib/burrow/sandboxes').filter((d) =>
        d.startsWith(`run-${process.pid}-`),
      );
      const disk = roots
        .map((r) => join('/var/lib/burrow/sandboxes', r, id, 'disk'))
        .find((d) => {
          try {
            return statSync(join(d, 'home')).isDirectory();
          } catch {
            return false;
          }
        });
      expect(disk, 'the instance disk on the host').toBeDefined();
      const asNobody = (args: string[]) => {
        try {
          execFileSync(
            'setpriv',
            ['--reuid=65534', '--regid=65534', '--clear-groups', '--', ...args],
            { stdio: 'pipe' },
          );
          return 'allowed';
        } catch {
          return 'refused';
        }
      };
      expect(asNobody(['cat', join(disk!, 'home', 'diary.txt')])).toBe('refused');
      expect(asNobody(['ls', join(disk!, 'home')])).toBe('refused');
      expect(asNobody(['touch', join(disk!, 'tmp', 'planted')])).toBe('refused');
    } finally {
      await call(server, `/v1/instance/${id}/stop`);
    }
  });
});

describe('descriptors the server inherited', () => {
  let child: ChildProcess | undefined;
  const dirs: string[] = [];
  afterAll(() => {
    child?.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('reach no process of an instance', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'burrow-fds-'));
    dirs.push(dataDir);
    const secret = join(dataDir, `inherited-${randomBytes(4).toString('hex')}`);
    writeFileSync(secret, 'inherited secret');
    const fd = openSync(secret, 'r');
    const root = resolve(import.meta.dirname, '../../..');
    // the server gets the file as descriptor 40, without close-on-exec, as a careless parent
    // (a shell redirection, a supervisor) would give it; above the descriptors a chain passes
    const stdio: StdioOptions = [
      'ignore',
      'pipe',
      'pipe',
      ...Array<'ignore'>(37).fill('ignore'),
      fd,
    ];
    const server = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', '--data-dir', dataDir],
      {
        cwd: root,
        stdio,
        env: { ...process.env, BURROW_API_KEY: 'fd-test-key-0123456789' },
      },
    );
    child = server;
    closeSync(fd);
    let out = '';
    server.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    server.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out), 'listening', 30_000);
    const s = {
      url: /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!,
      apiKey: 'fd-test-key-0123456789',
    };
    const { id } = await start(s, 'ubuntu');
    try {
      const fds = await sh(s, id, 'ls -l /proc/$$/fd /proc/1/fd 2>&1; cat /proc/$$/fd/40 2>&1');
      expect(fds).not.toContain('inherited');
      const initFds = instanceProcesses(id).flatMap((p) => {
        try {
          return readdirSync(`/proc/${p.pid}/fd`).map((f) =>
            readlinkSync(`/proc/${p.pid}/fd/${f}`),
          );
        } catch {
          return [];
        }
      });
      expect(initFds.filter((l) => l.includes('inherited-'))).toEqual([]);
    } finally {
      await call(s, `/v1/instance/${id}/stop`);
    }
  });
});
