/**
 * Seven system calls the seccomp filter refuses, made from an ubuntu instance's shell rather than
 * only read off the filter in a unit test: bpf, perf_event_open, userfaultfd, io_uring_setup,
 * open_by_handle_at, process_vm_writev and kexec_load. Each is made with arguments that do nothing
 * harmful where it is allowed, chosen so that the kernel itself, for an unprivileged user in
 * namespaces of its own on this host, answers something other than EPERM (it succeeds, or finds
 * the arguments wrong, or lacks the feature): so an EPERM inside is the filter's, not the
 * kernel's. The probe runs on the host that way first, to show it; then inside.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServer, type TestServer } from '../../helpers/server.js';

const PROBE = readFileSync(new URL('./seccomp-denials.probe.py', import.meta.url));
const CALLS = [
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'io_uring_setup',
  'open_by_handle_at',
  'process_vm_writev',
  'kexec_load',
] as const;

let server: TestServer;
let id: string;
let hostDir: string;

/** `name=result` lines of the probe's output. */
function results(out: string): Record<string, string> {
  return Object.fromEntries([...out.matchAll(/^(\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

beforeAll(async () => {
  hostDir = mkdtempSync(join(tmpdir(), 'burrow-seccomp-'));
  chmodSync(hostDir, 0o755);
  writeFileSync(join(hostDir, 'probe.py'), PROBE, { mode: 0o644 });
  server = await testServer({ maxInstances: 2 });
  const res = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
  const body = (await res.json()) as { id: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  id = body.id;
});

afterAll(async () => {
  if (id) await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  await server?.close();
  if (hostDir) rmSync(hostDir, { recursive: true, force: true });
});

describe.skipIf(!['x64', 'arm64'].includes(process.arch))('refused system calls', () => {
  it('each reaches the kernel on the host, unprivileged, and gets EPERM inside an instance', async () => {
    // on the host as nobody, in user, mount and network namespaces of its own: nothing filters
    const host = results(
      execFileSync(
        'setpriv',
        [
          '--reuid=65534',
          '--regid=65534',
          '--clear-groups',
          'unshare',
          '-Urmn',
          '/usr/bin/python3',
          join(hostDir, 'probe.py'),
        ],
        { encoding: 'utf8', cwd: hostDir },
      ),
    );
    for (const call of CALLS) {
      expect(host[call], `${call} on the host`).toBeDefined();
      expect(host[call], `${call} on the host`).not.toBe('EPERM');
    }
    expect(host.written).toBe('yes');

    const res = await server.api(`/v1/instance/${id}/bash`, {
      json: {
        command: `echo ${PROBE.toString('base64')} | base64 -d > /tmp/probe.py && python3 /tmp/probe.py`,
        timeout: 30,
      },
    });
    const body = (await res.json()) as { output?: string; error?: string };
    expect(res.status, JSON.stringify(body)).toBe(200);
    const inside = results(`${body.output ?? ''}${body.error ?? ''}`);
    expect(Object.fromEntries(CALLS.map((c) => [c, inside[c]]))).toEqual(
      Object.fromEntries(CALLS.map((c) => [c, 'EPERM'])),
    );
    expect(inside.written).toBe('no');
  });
});
