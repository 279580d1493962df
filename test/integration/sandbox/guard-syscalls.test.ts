/**
 * The seccomp filter, attacked from an ubuntu instance's shell: other ABIs (`int 0x80`, x32),
 * mounts in a nested user namespace (old and new mount API, on a directory that exists),
 * nf_tables and legacy iptables from a nested user and network namespace, packet and vsock
 * sockets, copying another process's descriptor, typing into a terminal. Each probe runs first on
 * the host, as an unprivileged user in namespaces of its own, to show it reaches the kernel code
 * it aims at when nothing refuses it; then inside, where the filter must refuse it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostAbi32, readAbi32Facts } from '../../helpers/abi32.js';
import { testServer, type TestServer } from '../../helpers/server.js';

const PROBE = readFileSync(new URL('./guard-syscalls.probe.py', import.meta.url));
/** SIGSYS, as a shell reports a process it killed: 128 + 31. */
const KILLED_BY_SIGSYS = 159;
/** SIGSEGV, as a shell reports a process it killed: 128 + 11. */
const KILLED_BY_SIGSEGV = 139;

let server: TestServer;
let id: string;
let hostDir: string;

/** Runs `command` in the instance's bash; its output and error text. */
async function sh(command: string, timeout = 30): Promise<string> {
  const res = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout } });
  const body = (await res.json()) as { output?: string; error?: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  return `${body.output ?? ''}${body.error ?? ''}`;
}

/** `name=result` lines of the probe's output. */
function results(out: string): Record<string, string> {
  return Object.fromEntries([...out.matchAll(/^(\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/**
 * The probe on the host, as nobody, in new user, mount and network namespaces. `unshare` leaves
 * mount propagation alone: making it private is itself a mount call, which the filter refuses.
 */
const onHostArgv = (...args: string[]) => [
  ...['--reuid=65534', '--regid=65534', '--clear-groups'],
  ...['unshare', '-Urmn', '--propagation=unchanged'],
  ...['/usr/bin/python3', join(hostDir, 'probe.py'), ...args],
];

function onHost(...args: string[]): Record<string, string> {
  return results(execFileSync('setpriv', onHostArgv(...args), { encoding: 'utf8', cwd: hostDir }));
}

/**
 * The probe of another ABI on the host, as `onHost` runs it: what it printed, or the signal that
 * ended it (without that ABI in the kernel, the call is a fault that kills the probe).
 */
function abiOnHost(kind: 'int80'): { results: Record<string, string>; signal: string | null } {
  const run = spawnSync('setpriv', onHostArgv(kind), { encoding: 'utf8', cwd: hostDir });
  if (run.signal === null && run.status !== 0) throw new Error(`probe ${kind}: ${run.stderr}`);
  return { results: results(run.stdout), signal: run.signal };
}

/** The probe inside the instance, in a nested user, mount and network namespace when `nested`. */
async function inside(nested: boolean, ...args: string[]) {
  const out = await sh(
    `${nested ? 'unshare -Urmn --propagation=unchanged ' : ''}python3 /tmp/probe.py ${args.join(' ')}`,
  );
  return results(out);
}

beforeAll(async () => {
  hostDir = mkdtempSync(join(tmpdir(), 'burrow-guard-'));
  chmodSync(hostDir, 0o755);
  writeFileSync(join(hostDir, 'probe.py'), PROBE, { mode: 0o644 });
  mkdirSync(join(hostDir, 'target'));
  chmodSync(join(hostDir, 'target'), 0o777);
  server = await testServer({ maxInstances: 2 });
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  const body = (await res.json()) as { id: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  id = body.id;
  await sh(`echo ${PROBE.toString('base64')} | base64 -d > /tmp/probe.py`);
});

afterAll(async () => {
  if (id) await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  await server?.close();
  if (hostDir) rmSync(hostDir, { recursive: true, force: true });
});

describe.skipIf(process.arch !== 'x64')('another ABI on x86_64', () => {
  it('kills a process that makes a 32-bit system call with int 0x80, or it faults as on the host', async () => {
    // whether this host runs the 32-bit ABI at all: its kernel's configuration and command line,
    // and its own probe (which must answer getpid where it does)
    const host = abiOnHost('int80');
    const abi = hostAbi32({ ...readAbi32Facts(), probe: host.signal ?? 'ok' });
    const out = await sh('python3 /tmp/probe.py int80; echo rc=$?');
    expect(out).not.toMatch(/^int80=/m);
    // with the ABI, getpid answers through it on the host, and inside the filter kills the process
    // at the call; without it, int 0x80 is a fault, not a system call, on the host as inside,
    // where it kills the process before any system call code (the filter's included) runs, so
    // nothing of the host is reached
    expect(host.signal ?? 'ok', `the probe on the host (${abi.why})`).toBe(abi.host);
    if (abi.present) expect(Number(host.results.int80)).toBeGreaterThan(0);
    expect(out).toContain(`rc=${abi.inside === 'SIGSYS' ? KILLED_BY_SIGSYS : KILLED_BY_SIGSEGV}`);
  });

  it('kills a process that makes an x32 system call (number | 0x40000000)', async () => {
    const out = await sh('python3 /tmp/probe.py x32; echo rc=$?');
    expect(out).not.toMatch(/^x32=/m);
    expect(out).toContain(`rc=${KILLED_BY_SIGSYS}`);
  });
});

describe('a nested user namespace', () => {
  it('cannot mount, with the old or the new mount API, on a directory that exists', async () => {
    const calls = [
      'mount',
      'fspick',
      'umount2',
      'fsopen',
      'open_tree',
      'open_tree_attr',
      'mount_setattr',
    ];
    const host = onHost('mounts', join(hostDir, 'target'));
    for (const call of [...calls, 'fsconfig', 'fsmount', 'move_mount']) {
      expect(host[call], `${call} on the host`).toBe('ok');
    }
    expect(host.mounted).toBe('yes');

    expect(await sh('mkdir -p /tmp/guard-target && echo made')).toContain('made');
    const got = await inside(true, 'mounts', '/tmp/guard-target');
    for (const call of calls) expect(got[call], call).toBe('EPERM');
    expect(got.mounted).toBe('no');
  });

  it('cannot reach nf_tables, xfrm or legacy iptables, nor open packet sockets', async () => {
    const host = onHost('netfilter');
    expect(host).toMatchObject({
      nf_netlink: 'ok',
      xfrm_netlink: 'ok',
      ipt_get_info: 'ok',
      ipt_set_replace: 'EINVAL', // reached the table code, which refused the empty table
      ip6t_set_replace: 'EINVAL',
      packet: 'ok',
      sock_packet: 'ok',
    });
    expect(await inside(true, 'netfilter')).toMatchObject({
      nf_netlink: 'EPROTONOSUPPORT',
      xfrm_netlink: 'EPROTONOSUPPORT',
      route_netlink: 'ok',
      ipt_get_info: 'EPERM',
      ipt_set_replace: 'EPERM',
      ebt_set_entries: 'EPERM',
      ip6t_set_replace: 'EPERM',
      ipv6_tclass: 'ok',
      packet: 'EAFNOSUPPORT',
      sock_packet: 'EAFNOSUPPORT',
      raw_ip: 'ok', // its own namespace's raw IP stays, as for ping in there
    });
  });
});

describe('any process of the instance', () => {
  it("cannot open vsock, copy another process's descriptor, type into a terminal, or use native AIO", async () => {
    const host = onHost('others');
    expect(host).toMatchObject({
      vsock: 'ok',
      pidfd_getfd: 'ok',
      tiocsti: 'ok',
      io_setup: 'ok',
      io_submit: 'EINVAL', // reached the kernel, which found no context
    });
    expect(await inside(false, 'others')).toMatchObject({
      vsock: 'EAFNOSUPPORT',
      tcp: 'ok',
      unix: 'ok',
      pidfd_getfd: 'EPERM',
      tiocsti: 'EPERM',
      io_setup: 'EPERM',
      io_submit: 'EPERM',
    });
  });
});
