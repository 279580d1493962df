/**
 * The streams an ubuntu instance writes and the server reads are bounded (issue 18, item 4):
 * the toolbox's frames, the kernel bridge's lines, the desktop Chromium's DevTools pipe, a bash
 * session's status pipe. Each is
 * flooded the way an attacker would: from the instance's shell with a copy of the descriptor
 * (pidfd_getfd, refused by seccomp where that defence is in place: the attack then stops there),
 * and from the host as root (no seccomp), which reaches the same real channel. The server cuts
 * the peer at its bound, keeps its memory, and the tool works again on its next call.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { floodCommand, floodFromHost, floodResult, type FloodResult } from '../../helpers/flood.js';
import { eventually, instancePids } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const MiB = 1024 * 1024;
const EPIPE = 32;

const server = useServer({ isolation: { memoryBytes: 1024 * MiB } });
const instance = useInstance(server, 'ubuntu');

const post = async (path: string, json: unknown = {}) => {
  const res = await server.api(`/v1/instance/${instance.id}${path}`, { json });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

async function sh(command: string, timeout = 120): Promise<string> {
  const r = await post('/bash', { command, timeout });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return `${(r.body.output as string | undefined) ?? ''}${(r.body.error as string | undefined) ?? ''}`;
}

/** Host pid of the instance's process whose command line starts with `exe` and names `needle`. */
function hostPid(exe: string, needle: string): number | undefined {
  return instancePids(instance.id).find((pid) => {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return cmd.startsWith(`${exe}\0`) && cmd.includes(needle);
    } catch {
      return false;
    }
  });
}

/**
 * The descriptor a Python helper (toolbox.py, bridge.py) answers on: both keep a duplicate of
 * their stdout for the protocol and point fd 1 at stderr.
 */
function protocolFd(pid: number): number {
  const link = (fd: string) => readlinkSync(`/proc/${pid}/fd/${fd}`);
  const std = new Set(['0', '1', '2'].map(link));
  const fd = readdirSync(`/proc/${pid}/fd`)
    .filter((fd) => Number(fd) > 2 && /^(socket|pipe):/.test(link(fd)) && !std.has(link(fd)))
    .map(Number)
    .sort((a, b) => a - b)[0];
  expect(fd).toBeDefined();
  return fd!;
}

/**
 * Flood descriptor `fd` of the instance's process `pid` (found inside by `needle`) with `total`
 * bytes after `prefix`: from its shell, and where the sandbox refuses that, from the host. The
 * flood that got through must have been cut (EPIPE) before `bound` plus what sockets hold, and
 * the server's memory must not have grown by much more than `bound`.
 */
async function flood(
  target: { pid: number; fd: number; needle: string },
  total: number,
  bound: number,
  prefix = Buffer.alloc(0),
): Promise<FloodResult> {
  const before = rss();
  const { pid, fd, needle } = target;
  let r = floodResult(await sh(floodCommand(needle, fd, total, prefix)));
  expect(r.pid, JSON.stringify(r)).not.toBeNull();
  if (r.via === null) {
    expect(Object.keys(r.refused), JSON.stringify(r)).toContain('pidfd_getfd');
    r = await floodFromHost(pid, fd, total, prefix);
    expect(r.via).toBe('pidfd_getfd');
  }
  expect(r.writeErrno, JSON.stringify(r)).toBe(EPIPE);
  expect(r.written).toBeLessThan(bound + 16 * MiB);
  expect(rss() - before).toBeLessThan(bound + 100 * MiB);
  return r;
}

/** Resident memory of this process (the server runs in it), after a collection if exposed. */
function rss(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().rss;
}

describe('an ubuntu instance flooding what the server reads', () => {
  it('the toolbox: a frame past its bounds kills it, and the next file call starts a new one', async () => {
    expect((await post('/file', { command: 'write', path: 'a.txt', content: 'one' })).status).toBe(
      200,
    );
    // inside: a frame declaring 1 GiB of payload, then 400 MiB of it
    const frame = Buffer.from('{"id":99,"ok":true,"payload_bytes":1073741824}');
    const prefix = Buffer.concat([Buffer.from([0, 0, 0, frame.length]), frame]);
    const pid = hostPid('/usr/bin/python3', "'toolbox.py'");
    expect(pid).toBeDefined();
    // nothing was asked: its first byte is a violation
    await flood({ pid: pid!, fd: protocolFd(pid!), needle: "'toolbox.py'" }, 400 * MiB, 0, prefix);
    await eventually(() => hostPid('/usr/bin/python3', "'toolbox.py'") === undefined, 'killed');
    const read = await post('/file', { command: 'read', path: 'a.txt' });
    expect(read.status).toBe(200);
    expect(JSON.stringify(read.body)).toContain('one');
  });

  it('the kernel bridge: a line past its bound kills it, and the next execution starts a new one', async () => {
    const first = await post('/code/execute', { code: 'x = 41' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const needle = '<burrow-kernel-bridge>';
    const pid = hostPid('/usr/bin/python3', needle);
    expect(pid).toBeDefined();
    await flood({ pid: pid!, fd: protocolFd(pid!), needle }, 300 * MiB, 64 * MiB);
    await eventually(() => hostPid('/usr/bin/python3', needle) === undefined, 'killed');
    const again = await post('/code/execute', { code: 'print(6 * 7)' });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.stdout).toBe('42\n');
  });

  // The second attack wrote such lines with millions of objects (each blocked the server for
  // 50 s while it was decoded); a reply to nothing is now a violation whatever it holds. (Its
  // size here is what a command line can carry; test/unit/bounds-streams.test.ts has the cost.)
  it('the kernel bridge: a reply nobody asked for kills it before anything is decoded', async () => {
    const first = await post('/code/execute', { code: 'x = 41' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const needle = '<burrow-kernel-bridge>';
    const pid = hostPid('/usr/bin/python3', needle);
    expect(pid).toBeDefined();
    const bomb = Buffer.from(`{"id": 999999, "ok": true, "result": [${'{},'.repeat(10_000)}{}]}\n`);
    const t = performance.now();
    await flood({ pid: pid!, fd: protocolFd(pid!), needle }, 64 * MiB, 0, bomb);
    await eventually(() => hostPid('/usr/bin/python3', needle) === undefined, 'killed');
    expect(performance.now() - t).toBeLessThan(20_000);
    const again = await post('/code/execute', { code: 'print(6 * 7)' });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.stdout).toBe('42\n');
  });

  it("the desktop Chromium's pipe: a message past its bound kills that browser, the instance stays up", async () => {
    expect((await post('/browser/start')).status).toBe(200);
    const isBrowser = (pid: number) =>
      !readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=');
    const main = () => {
      const pid = hostPid('/usr/lib/chromium/chromium', '--remote-debugging-pipe');
      return pid !== undefined && isBrowser(pid) ? pid : undefined;
    };
    await eventually(() => main() !== undefined, 'the desktop Chromium');
    // Chromium writes its replies and events to fd 4: one message that never ends
    const target = { pid: main()!, fd: 4, needle: '--remote-debugging-pipe' };
    await flood(target, 600 * MiB, 256 * MiB, Buffer.from('{"method":"'));
    await eventually(() => main() === undefined, 'that Chromium killed');
    // the browser's operations say it is not running (not a 500); the instance is fine
    const url = await server.api(`/v1/instance/${instance.id}/browser/current_url`);
    expect(url.status).toBe(400);
    const status = await server.api(`/v1/instance/${instance.id}`);
    expect(((await status.json()) as { status: string }).status).toBe('running');
    expect((await post('/browser/start')).status).toBe(200);
    expect((await server.api(`/v1/instance/${instance.id}/browser/current_url`)).status).toBe(200);
  });

  // bash keeps copies (fd 10 and up) of the descriptors `eval`'s redirections close, and the
  // command runs in that shell: its builtins and subshells reach them. Each copy that is not the
  // command's own stdout or stderr gets the attack, from a subshell of its own.
  const toSavedFds = (what: string) =>
    [
      'own() { [ "$(readlink "$1")" = "$(readlink /proc/$$/fd/1)" ] || [ "$(readlink "$1")" = "$(readlink /proc/$$/fd/2)" ]; }',
      'for f in /proc/$$/fd/*; do n=${f##*/}',
      `  if [ "$n" -ge 10 ] && [ "$n" -ne 255 ] && ! own "$f"; then (${what} >&$n 2>/dev/null) & fi`,
      'done; wait; echo after',
    ].join('\n');

  it.each([
    ['a flood of status lines', "yes '' | head -c 20000000"],
    ['one endless line', 'head -c 20000000 /dev/zero'],
    ['a status nobody waits for', "builtin printf '0\\n0\\n'"],
  ])("a bash session's status pipe: %s ends that shell, not the server", async (_, what) => {
    const r = await post('/bash', { command: toSavedFds(what), session: 7, timeout: 60 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // the forged status was not believed: the shell was ended, and the call says so
    expect(r.body.system).toMatch(/session 7: exit status \d+; the shell exited/);
    // the next call gets a fresh shell in that session, and other sessions never noticed
    const again = await post('/bash', { command: 'echo $((6 * 7))', session: 7 });
    expect(again.body).toMatchObject({ output: '42\n' });
    expect(again.body.system).toMatch(/session 7: exit status 0$/);
  });
});
