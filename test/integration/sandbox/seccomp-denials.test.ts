/**
 * Every refusal of the seccomp filter, made from an ubuntu instance's shell at both privilege
 * levels (a root server, and the embedded default run by a normal user), not only read off the
 * filter in a unit test: each system call it refuses by name (its own table, so a name added
 * there without a probe here fails), each family, netlink protocol, socket option range and
 * ioctl it refuses by argument, and the other ABIs it kills.
 *
 * Each probe is made with arguments that do nothing harmful where the call is allowed, chosen so
 * that the kernel itself answers something other than the filter's refusal: it succeeds, finds
 * the arguments wrong, or lacks the call. The probe runs first on the host as nobody, in user,
 * mount, network and pid namespaces of its own (as it runs inside, so capabilities over those are
 * held on both sides), to show that; then inside, where every row must get the filter's answer.
 * So an EPERM inside is the filter's, not the kernel's, except for the few calls whose kernel code
 * checks a capability of the host's namespaces before anything else (`HOST_CAPABILITY_FIRST`):
 * those answer EPERM to any instance whatever their arguments, and the filter is a second wall.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHECKED_SYSCALLS,
  DENIED_SYSCALLS,
  SECCOMP_ARCHES,
  seccompSupported,
} from '../../../src/server/sandbox/seccomp.js';
import { hostAbi32, readAbi32Facts, type Abi32 } from '../../helpers/abi32.js';
import { normalUser, type NormalUser } from '../../helpers/normal-user.js';
import { testServer, type TestServer } from '../../helpers/server.js';

const PROBE = readFileSync(new URL('./seccomp-denials.probe.py', import.meta.url));
/**
 * The calls refused by name on this architecture, and their numbers: the probe's argument. Every
 * call of the filter's number table but those it checks by argument, read from that table rather
 * than from the deny list, so a call dropped from the list stays probed (and then fails here).
 */
const NAMED: Record<string, number> = Object.fromEntries(
  Object.entries(SECCOMP_ARCHES[process.arch]?.numbers ?? {}).filter(
    ([name]) => !(CHECKED_SYSCALLS as readonly string[]).includes(name),
  ),
);

/**
 * Calls whose kernel code checks a capability of the host's namespaces first (or, where the
 * kernel lacks the call, answers ENOSYS): without the filter an instance gets EPERM from them too.
 * Module loading and kexec need CAP_SYS_MODULE / CAP_SYS_BOOT first on a kernel that has them;
 * swapoff, acct and vhangup a host capability first; syslog under dmesg_restrict; lookup_dcookie
 * CAP_SYS_ADMIN before it was removed.
 */
const HOST_CAPABILITY_FIRST = new Set([
  'init_module',
  'finit_module',
  'delete_module',
  'kexec_load',
  'kexec_file_load',
  'swapoff',
  'acct',
  'vhangup',
  'syslog',
  'lookup_dcookie',
]);

/** Every probe and the filter's answer to it inside an instance (`int80`: see `table()`). */
const NAMED_TABLE: Record<string, string> = {
  ...Object.fromEntries(Object.keys(NAMED).map((name) => [name, 'EPERM'])),
  // families: only Unix, IP and netlink (SOCK_PACKET is a packet socket)
  af_vsock: 'EAFNOSUPPORT',
  af_packet: 'EAFNOSUPPORT',
  sock_packet: 'EAFNOSUPPORT',
  socketpair_vsock: 'EAFNOSUPPORT',
  // netlink: only route, sock_diag, audit, uevent and generic
  netlink_netfilter: 'EPROTONOSUPPORT',
  netlink_xfrm: 'EPROTONOSUPPORT',
  // legacy netfilter socket options, a probe in each range
  ipt_so_get_info: 'EPERM',
  ipt_so_set_replace: 'EPERM',
  so_ip_set: 'EPERM',
  arpt_so_set_replace: 'EPERM',
  ebt_so_set_entries: 'EPERM',
  ip_vs_so_set_flush: 'EPERM',
  ip6t_so_set_replace: 'EPERM',
  ip6t_so_get_revision: 'EPERM',
  // terminal injection and console paste
  tiocsti: 'EPERM',
  tioclinux: 'EPERM',
};

/** What the 32-bit ABI's `int 0x80` does on this host: its kernel's word and its own probe. */
let abi32: Abi32;

/** Every probe and the filter's answer to it inside an instance, once the host was probed. */
function table(): Record<string, string> {
  return {
    ...NAMED_TABLE,
    // other ABIs on x86_64: killed; int 0x80 where the host has no 32-bit ABI is a fault first
    ...(process.arch === 'x64' && { int80: abi32.inside, x32: 'SIGSYS' }),
  };
}

/**
 * How long one cold start of `node --import tsx` takes on this machine now (ms), measured when
 * this file loads: the unprivileged case starts a server, an instance and a probe at that pace.
 */
const COLD_START_MS = await (async () => {
  const began = performance.now();
  await promisify(execFile)(process.execPath, ['--import', 'tsx', '-e', '0']);
  return performance.now() - began;
})();
/** The unprivileged case's budget: a minute, and a hundred and twenty cold starts at that pace. */
const CASE_MS = 60_000 + 120 * COLD_START_MS;

/** `name=result` lines of the probe's output. */
function results(out: string): Record<string, string> {
  return Object.fromEntries([...out.matchAll(/^(\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** The shell command that runs the probe inside, in namespaces of its own as on the host. */
const INSIDE = [
  `echo ${PROBE.toString('base64')} | base64 -d > /tmp/probe.py`,
  `unshare -Urmnpf --propagation=unchanged python3 /tmp/probe.py '${JSON.stringify(NAMED)}'`,
].join(' && ');

/** The probe's answers inside, against the table, with the host's (`host`) beside them. */
function expectRefused(inside: Record<string, string>, host: Record<string, string>) {
  const TABLE = table();
  expect(Object.fromEntries(Object.keys(TABLE).map((name) => [name, inside[name]]))).toEqual(TABLE);
  // what made the answer the filter's: the kernel answered otherwise on the host
  for (const [name, refused] of Object.entries(TABLE)) {
    if (HOST_CAPABILITY_FIRST.has(name)) continue;
    if (name === 'int80' && !abi32.present) continue; // a fault on both sides, asserted below
    expect(host[name], `${name} on the host, where nothing filters`).not.toBe(refused);
  }
}

let hostDir: string;
let host: Record<string, string>;

beforeAll(async () => {
  hostDir = mkdtempSync(join(tmpdir(), 'burrow-seccomp-'));
  chmodSync(hostDir, 0o755);
  writeFileSync(join(hostDir, 'probe.py'), PROBE, { mode: 0o644 });
  // on the host as nobody, in user, mount, network and pid namespaces of its own: nothing filters
  const { stdout } = await promisify(execFile)(
    'setpriv',
    [
      ...['--reuid=65534', '--regid=65534', '--clear-groups'],
      ...['unshare', '-Urmnpf', '--propagation=unchanged'],
      ...['/usr/bin/python3', join(hostDir, 'probe.py'), JSON.stringify(NAMED)],
    ],
    { encoding: 'utf8', cwd: hostDir },
  );
  host = results(stdout);
  abi32 = hostAbi32({ ...readAbi32Facts(), probe: host.int80 ?? 'ok' });
});

afterAll(() => {
  if (hostDir) rmSync(hostDir, { recursive: true, force: true });
});

describe('refused system calls', () => {
  it('every refusal has a probe that reached the kernel on the host', () => {
    // every architecture an instance runs on has a filter (no skip elsewhere: it fails there)
    expect(seccompSupported(), `a seccomp filter for ${process.arch}`).toBe(true);
    // every call the deny list names and this architecture has is probed
    const here = DENIED_SYSCALLS.filter((name) => name in NAMED);
    expect(Object.keys(NAMED).sort()).toEqual([...here].sort());
    expect(here.length).toBeGreaterThan(40);
    for (const name of Object.keys(table())) {
      expect(host[name], `${name} on the host`).toBeDefined();
    }
    // with the ABI, getpid answered through it on the host (`ok`); without it, a fault
    expect(host.int80 ?? 'ok', `int 0x80 on the host (${abi32.why})`).toBe(
      process.arch === 'x64' ? abi32.host : 'ok',
    );
    // the calls the kernel refuses first by a capability of the host: EPERM, or ENOSYS without
    // the call; any other answer means a probe no longer reaches what it aims at
    for (const name of HOST_CAPABILITY_FIRST) {
      if (name in NAMED) expect(['EPERM', 'ENOSYS', 'ok'], name).toContain(host[name]);
    }
  });

  describe('at the root level', () => {
    let server: TestServer;
    let id: string;
    beforeAll(async () => {
      server = await testServer({ maxInstances: 2 });
      const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
      const body = (await res.json()) as { id: string };
      expect(res.status, JSON.stringify(body)).toBe(200);
      id = body.id;
    });
    afterAll(async () => {
      if (id) await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
      await server?.close();
    });

    it('each is refused inside an instance with the filter’s answer', async () => {
      const res = await server.api(`/v1/instance/${id}/bash`, {
        json: { command: INSIDE, timeout: 120 },
      });
      const body = (await res.json()) as { output?: string; error?: string };
      expect(res.status, JSON.stringify(body)).toBe(200);
      expectRefused(results(`${body.output ?? ''}${body.error ?? ''}`), host);
    });
  });

  describe('at the unprivileged level (the embedded default run by a normal user)', () => {
    let user: NormalUser;
    beforeAll(() => {
      user = normalUser();
    });
    afterAll(() => user?.cleanup());

    it(
      'each is refused inside an instance with the filter’s answer',
      { timeout: CASE_MS },
      async () => {
        const r = await user.run(
          ['test/helpers/bash-as-user.ts'],
          { COMMAND: Buffer.from(INSIDE).toString('base64') },
          CASE_MS - 5_000,
        );
        const line = r.stdout.trim().split('\n').pop() ?? '';
        const f = JSON.parse(line || '{}') as { uid?: number; output?: string; error?: string };
        expect(f.error, r.stderr).toBeUndefined();
        expect(f.uid, 'the server ran as the normal user').toBe(user.uid);
        expectRefused(results(f.output ?? ''), host);
      },
    );
  });
});
