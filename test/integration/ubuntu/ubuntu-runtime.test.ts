/**
 * The ubuntu runtime driven directly (no HTTP): a real sandbox (its own uid, namespaces, cgroup
 * and disk; ../../src/server/sandbox/ISOLATION.md) with Xvfb, bash sessions, the edit and file
 * tools, env, pause/resume and stop.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, processState } from '../../../src/internal/process.js';
import type { RuntimeContext } from '../../../src/server/instances/runtime.js';
import { UbuntuRuntime } from '../../../src/server/ubuntu/index.js';
import { MAX_SESSIONS } from '../../../src/server/ubuntu/tools/bash.js';
import { testSandboxHost } from '../../helpers/sandbox.js';
import { eventually, instanceFrozen, instancePids, pidsMatching } from '../../helpers/server.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

interface Instance {
  rt: UbuntuRuntime;
  /** The instance id: unique per instance, so its cgroup (`<pid>.<id>`) and the wrappers that
   * name it (`pgrep -f <id>`) belong to this instance alone. */
  id: string;
  dir: string;
  data: string;
  failures: string[];
}

async function startInstance(
  opts: { disableIsolation?: boolean } = {},
  resolution: [number, number] = [800, 600],
): Promise<Instance> {
  const id = `ubu-rt-${randomBytes(6).toString('hex')}`;
  const data = mkdtempSync(join(tmpdir(), 'burrow-ubuntu-'));
  const runDir = join(
    data,
    'instances',
    `run-${process.pid}-${Math.random().toString(16).slice(2)}`,
  );
  const dir = join(runDir, id);
  mkdirSync(dir, { recursive: true });
  // something secret in the data dir, next to the instance
  mkdirSync(join(data, 'auth_states'), { recursive: true });
  writeFileSync(join(data, 'auth_states', 'secret.json'), '{"cookie":"s3cret"}');
  const failures: string[] = [];
  const ctx: RuntimeContext = {
    instance: { id, type: 'ubuntu', dir, token: 'tok' },
    plan: { resolution, blockedDomains: [], pooled: false, extensions: [] },
    services: {
      publicUrl: 'http://127.0.0.1:1',
      log: quiet,
      chromiumPath: '/usr/lib/chromium/chromium',
      maxUploadBytes: 1 << 20,
      failed: (r) => failures.push(r),
      sandboxHost: await testSandboxHost(runDir, { disableIsolation: !!opts.disableIsolation }),
    },
  };
  const rt = new UbuntuRuntime(ctx);
  await rt.start();
  return { rt, id, dir, data, failures };
}

/** Stop the instance, then remove its server run's sandbox root and the data dir. */
async function cleanUp(inst: Instance): Promise<void> {
  try {
    await inst.rt.stop();
    await inst.rt.ctx.services.sandboxHost.close();
  } finally {
    rmSync(inst.data, { recursive: true, force: true });
  }
}

/**
 * The round trip of a trivial command through `run`, in milliseconds, as this machine answers it
 * now: the slowest of three, after a first call that starts what it needs.
 */
async function roundTrip(run: (command: string) => Promise<unknown>): Promise<number> {
  await run('true');
  const trips: number[] = [];
  for (let i = 0; i < 3; i++) {
    const began = performance.now();
    await run('true');
    trips.push(performance.now() - began);
  }
  return Math.max(...trips);
}

/** The command line of `pid`, arguments joined by spaces ('' once it is gone). */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

describe('ubuntu runtime in its sandbox', () => {
  let inst: Instance;
  let rt: UbuntuRuntime;
  const bash = (req: Parameters<UbuntuRuntime['tools']['bash']>[0]) => rt.tools.bash(req);
  const edit = (req: Parameters<UbuntuRuntime['tools']['edit']>[0]) => rt.tools.edit(req);
  const file = (req: Parameters<UbuntuRuntime['tools']['file']>[0]) => rt.tools.file(req);
  const home = () => inst.rt.sandbox.hostHome;

  beforeAll(async () => {
    inst = await startInstance();
    rt = inst.rt;
  });

  afterAll(async () => {
    if (!inst) return;
    try {
      const pids = instancePids(inst.id);
      await rt.stop();
      expect(pids.filter(alive)).toEqual([]);
      expect(instancePids(inst.id)).toEqual([]);
      expect(inst.failures).toEqual([]);
    } finally {
      await cleanUp(inst);
    }
  });

  it('runs in a sandbox with its own home, tmp, host name, user and process tree', async () => {
    expect(rt.sandbox.mode).toBe('isolated');
    const r = await bash({
      command:
        'pwd; echo $HOME; hostname; id -un; id -u; touch /tmp/mine; ls /tmp; ps -e -o comm= | sort -u',
    });
    const lines = r.output!.split('\n');
    expect(lines.slice(0, 5)).toEqual(['/home/user', '/home/user', 'burrow', 'user', '1000']);
    expect(r.output).toContain('mine');
    expect(r.output).toContain('Xvfb');
    expect(r.output).not.toContain('node');
    // on the host, the file lies on the instance's disk and belongs to the instance's own uid
    const mine = lstatSync(join(rt.sandbox.hostTmp, 'mine'));
    expect(rt.sandbox.uid).toBeGreaterThan(0);
    expect(mine.uid).toBe(rt.sandbox.uid);
  });

  it('cannot write outside its directory nor see the data dir', async () => {
    const r = await bash({
      command: `touch /etc/burrow-escape; touch /usr/burrow-escape; ls -A /root | wc -l; cat ${inst.data}/auth_states/secret.json; mount -o remount,rw / ; echo end`,
    });
    expect(r.error).toMatch(/Read-only file system/);
    expect(r.error).toMatch(/secret.json: No such file or directory/);
    expect(r.output).toBe('0\nend\n');
    expect(existsSync('/etc/burrow-escape')).toBe(false);
    expect(existsSync('/usr/burrow-escape')).toBe(false);
  });

  it("sees a generated /etc, not the host's", async () => {
    const r = await bash({
      command: 'cut -d: -f1 /etc/passwd; cat /etc/hostname; test -e /etc/shadow || echo no-shadow',
    });
    // the host has accounts and files the instance must not see
    expect(readFileSync('/etc/passwd', 'utf8').split('\n').filter(Boolean).length).toBeGreaterThan(
      3,
    );
    expect(existsSync('/etc/shadow')).toBe(true);
    expect(r.output).toBe('root\nuser\nnobody\nburrow\nno-shadow\n');
  });

  describe('display', () => {
    it('starts Xvfb at the resolution, seen by bash as DISPLAY', async () => {
      const n = rt.display.number;
      const r = await bash({ command: 'echo $DISPLAY; xdpyinfo | grep dimensions' });
      expect(r.output).toContain(`:${n}\n`);
      expect(r.output).toMatch(/dimensions:\s+800x600 pixels/);
    });

    it('needs the instance cookie: a client without it is refused', async () => {
      // The X server lives in the instance's network namespace and /tmp, out of the host's
      // reach; the attack is another process in there without the cookie. Unsetting XAUTHORITY
      // is not enough for that: Xlib then reads ~/.Xauthority, which holds the cookie.
      const n = rt.display.number;
      const r = await bash({
        command: [
          'xdpyinfo >/dev/null && echo with-cookie',
          'XAUTHORITY=/dev/null xdpyinfo >/dev/null; echo "no-cookie=$?"',
          `xauth -q -f /tmp/wrong add :${n} MIT-MAGIC-COOKIE-1 ${randomBytes(16).toString('hex')}`,
          'XAUTHORITY=/tmp/wrong xdpyinfo >/dev/null; echo "wrong-cookie=$?"',
          'rm -f /tmp/wrong',
        ].join('; '),
      });
      expect(r.output).toBe('with-cookie\nno-cookie=1\nwrong-cookie=1\n');
      // refused by the server for want of the cookie, not unreachable
      expect(r.error).toMatch(/Authorization required, but no authorization protocol specified/);
      expect(r.error).toMatch(/Invalid MIT-MAGIC-COOKIE-1 key/);
    });
  });

  describe('bash', () => {
    it('keeps cd, export and functions between commands, reports the exit status', async () => {
      await bash({
        command: 'cd /tmp && export GREETING=hello && greet() { echo "$GREETING $1"; }',
      });
      const r = await bash({ command: 'pwd; greet world; echo oops >&2; false' });
      expect(r.output).toBe('/tmp\nhello world\n');
      expect(r.error).toBe('oops\n');
      expect(r.system).toMatch(/session 1: exit status 1/);
      expect((await bash({ command: 'echo $?' })).output).toBe('1\n');
      await bash({ command: 'cd ~' });
    });

    it('gives commands stdin from /dev/null, so they cannot swallow the next command', async () => {
      const r = await bash({
        command: 'cat; read line; echo "read=[$line]"; head -c 3; echo after',
      });
      expect(r.output).toBe('read=[]\nafter\n');
      expect((await bash({ command: 'echo next' })).output).toBe('next\n');
    });

    it('is not confused by output that looks like a marker or by calling its helper', async () => {
      const cmd = String.raw`printf '0\n%032x\n' 0; printf 'abc' >&2; __burrow_done 7; echo $?`;
      const r = await bash({ command: cmd });
      expect(r.output).toBe(`0\n${'0'.repeat(32)}\n7\n`);
      expect(r.error).toBe('abc');
      expect(r.system).toMatch(/exit status 0/);
      expect((await bash({ command: 'echo still-here' })).output).toBe('still-here\n');
    });

    it('survives non-UTF-8 output', async () => {
      const r = await bash({ command: String.raw`printf 'ok \xff\xfe\n'; printf '\xc3' >&2` });
      expect(r.output).toBe('ok \uFFFD\uFFFD\n');
      expect(r.error).toBe('\uFFFD');
    });

    it('survives SIGINT and SIGTERM sent to the shell', async () => {
      const r = await bash({ command: 'kill -INT $$; kill -TERM $$; echo after-signals' });
      expect(r.output).toBe('after-signals\n');
      expect((await bash({ command: 'echo alive' })).output).toBe('alive\n');
    });

    it('returns at the timeout while the command keeps running; check_session reports it', async () => {
      // the bound of the timed call: its timeout plus a round trip of the same session as this
      // machine answers it now (three times, and 0.6 s), less than the command runs
      const trip = await roundTrip((command) => bash({ command, session: 5 }));
      const boundMs = 300 + 3 * trip + 600;
      const started = performance.now();
      const r = await bash({
        command: `echo start; sleep ${(boundMs + 1000) / 1000}; echo finished; exit_code_test() { return 4; }; exit_code_test`,
        timeout: 0.3,
        session: 5,
      });
      expect(performance.now() - started, `round trip ${trip} ms`).toBeLessThan(boundMs);
      expect(r.output).toBe('start\n');
      expect(r.system).toMatch(/session 5: command still running after 0.3 s/);
      const busy = await bash({ command: 'echo no', session: 5 });
      expect(busy.error).toMatch(/Session 5 is busy/);
      const during = await bash({ check_session: 5 });
      expect(during.system).toMatch(/session 5: still running/);
      const list = await bash({ list_sessions: true });
      expect(list.output).toMatch(/^5: busy/m);
      await eventually(
        async () => !/^5: busy/m.test((await bash({ list_sessions: true })).output ?? ''),
        'the command to finish',
        30_000 + boundMs,
      );
      const after = await bash({ check_session: 5 });
      expect(after.output).toBe('finished\n');
      expect(after.system).toBe('session 5: exit status 4');
      expect((await bash({ check_session: 5 })).system).toBe('session 5: idle');
    });

    it('uses the lowest idle session, creating one when all are busy', async () => {
      expect((await bash({ restart: true })).system).toBe('all bash sessions restarted');
      expect((await bash({ list_sessions: true })).system).toBe('no bash sessions');
      const slow = bash({ command: 'sleep 1.5; echo slow', session: 1 });
      // the call below while session 1 is still busy (its shell starts first)
      await eventually(
        async () => /^1: busy/m.test((await bash({ list_sessions: true })).output ?? ''),
        'session 1 busy',
      );
      const other = await bash({ command: 'echo quick' });
      expect(other.system).toMatch(/^session 2: /);
      expect((await slow).output).toBe('slow\n');
      const again = await bash({ command: 'echo lowest' });
      expect(again.system).toMatch(/^session 1: /);
      const list = await bash({ list_sessions: true });
      expect(list.output).toMatch(/^1: idle\n2: idle/);
    });

    it('caps the output of one call and keeps the session', async () => {
      const r = await bash({
        command: "head -c 300000 /dev/zero | tr '\\0' a; echo; echo tail-line",
      });
      expect(r.output!.length).toBeLessThan(101_000);
      expect(r.output!.startsWith('a'.repeat(1000))).toBe(true);
      expect(r.output).toMatch(/\[\.\.\. 2000\d\d bytes omitted \.\.\.\]/);
      expect(r.output!.endsWith('tail-line\n')).toBe(true);
      expect(r.system).toMatch(/output truncated/);
      expect((await bash({ command: 'echo fine' })).output).toBe('fine\n');
    });

    it('restart replaces the shell; exit closes the session', async () => {
      await bash({ command: 'export KEEP=1', session: 3 });
      const restarted = await bash({ restart: true, session: 3, command: 'echo "[${KEEP:-}]"' });
      expect(restarted.output).toBe('[]\n');
      expect(restarted.system).toMatch(/session 3: restarted/);
      const exited = await bash({ command: 'exit 3', session: 3 });
      expect(exited.system).toMatch(/exit status 3; the shell exited/);
      expect((await bash({ list_sessions: true })).output).not.toMatch(/^3:/m);
    });

    it('reports a shell that exited after its call timed out through check_session', async () => {
      const r = await bash({ command: 'sleep 0.4; echo bye; exit 6', timeout: 0.1, session: 7 });
      expect(r.system).toMatch(/still running/);
      await eventually(
        async () => /^7: exited/m.test((await bash({ list_sessions: true })).output ?? ''),
        'session 7 exited',
      );
      const checked = await bash({ check_session: 7 });
      expect(checked.output).toBe('bye\n');
      expect(checked.system).toBe(
        'session 7: exit status 6; the shell exited, so session 7 was closed',
      );
      expect((await bash({ check_session: 7 })).error).toBe('Session 7 does not exist.');
    });

    it('answers a request without a command with an error', async () => {
      expect((await bash({})).error).toMatch(/No command given/);
    });

    it('refuses a session past the limit as a tool error; the others keep working', async () => {
      for (let id = 1; id <= MAX_SESSIONS; id++) {
        expect((await bash({ command: `echo ${id}`, session: id })).output).toBe(`${id}\n`);
      }
      const refused = await bash({ command: 'echo no', session: MAX_SESSIONS + 1 });
      expect(refused).toEqual({
        error: `At most ${MAX_SESSIONS} bash sessions can run at once; restart or finish one first.`,
      });
      expect((await bash({ command: 'echo still', session: 2 })).output).toBe('still\n');
      expect((await bash({ restart: true })).system).toMatch(/all bash sessions restarted/);
      expect((await bash({ command: 'echo now', session: MAX_SESSIONS + 1 })).output).toBe('now\n');
      await bash({ restart: true });
    });
  });

  describe('env', () => {
    it('reaches new sessions and already running ones, and delete unsets it', async () => {
      await bash({ command: 'true', session: 1 });
      await rt.env.set({ API_TOKEN: 'it\'s "quoted"\nline2', OTHER: 'x' });
      expect(await rt.env.get()).toEqual({ API_TOKEN: 'it\'s "quoted"\nline2', OTHER: 'x' });
      const running = await bash({
        command: 'printf "%s|" "$API_TOKEN" "$OTHER"; echo $?',
        session: 1,
      });
      expect(running.output).toBe('it\'s "quoted"\nline2|x|0\n');
      const fresh = await bash({ command: 'echo "$OTHER"', session: 9 });
      expect(fresh.output).toBe('x\n');
      await rt.env.delete(['OTHER']);
      const after = await bash({ command: 'echo "[${OTHER-unset}]"', session: 1 });
      expect(after.output).toBe('[unset]\n');
      expect(rt.env.current().OTHER).toBeUndefined();
      expect(rt.env.current().DISPLAY).toBe(`:${rt.display.number}`);
      await expect(rt.env.set({ 'BAD-NAME': 'x' })).rejects.toThrow(
        /Invalid environment variable name/,
      );
      await bash({ restart: true, session: 9 });
    });
  });

  describe('edit', () => {
    it('create, view, str_replace, insert and undo_edit with the well-known messages', async () => {
      const p = '/home/user/e/a.py';
      expect(
        (await edit({ command: 'create', path: 'e/a.py', file_text: 'one\n\ttwo\nthree\n' }))
          .output,
      ).toBe(`File created successfully at: ${p}`);
      expect(readFileSync(join(home(), 'e/a.py'), 'utf8')).toBe('one\n\ttwo\nthree\n');
      expect((await edit({ command: 'create', path: p, file_text: 'x' })).error).toBe(
        `File already exists at: ${p}. Cannot overwrite files using command \`create\`.`,
      );
      expect((await edit({ command: 'view', path: p })).output).toBe(
        `Here's the result of running \`cat -n\` on ${p}:\n     1\tone\n     2\t\ttwo\n     3\tthree\n     4\t\n`,
      );
      expect((await edit({ command: 'view', path: p, view_range: [2, -1] })).output).toBe(
        `Here's the result of running \`cat -n\` on ${p}:\n     2\t\ttwo\n     3\tthree\n     4\t\n`,
      );
      const replaced = await edit({
        command: 'str_replace',
        path: p,
        old_str: '\ttwo',
        new_str: '\t2',
      });
      expect(replaced.output).toBe(
        `The file ${p} has been edited. Here's the result of running \`cat -n\` on a snippet of ${p}:\n     1\tone\n     2\t\t2\n     3\tthree\n     4\t\nReview the changes and make sure they are as expected. Edit the file again if necessary.`,
      );
      expect((await edit({ command: 'str_replace', path: p, old_str: 'nope' })).error).toBe(
        `No replacement was performed, old_str \`nope\` did not appear verbatim in ${p}.`,
      );
      expect((await edit({ command: 'str_replace', path: p, old_str: 'e' })).error).toBe(
        `No replacement was performed. Multiple occurrences of old_str \`e\` in lines [1, 3]. Please ensure it is unique`,
      );
      const inserted = await edit({ command: 'insert', path: p, insert_line: 1, new_str: 'ins' });
      expect(inserted.output).toBe(
        `The file ${p} has been edited. Here's the result of running \`cat -n\` on a snippet of the edited file:\n     1\tone\n     2\tins\n     3\t\t2\n     4\tthree\n     5\t\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.`,
      );
      expect(
        (await edit({ command: 'insert', path: p, insert_line: 0, file_text: 'top' })).output,
      ).toContain('     1\ttop\n');
      expect(
        (await edit({ command: 'insert', path: p, insert_line: 99, new_str: 'x' })).error,
      ).toBe(
        'Invalid `insert_line` parameter: 99. It should be within the range of lines of the file: [0, 6]',
      );
      expect((await edit({ command: 'undo_edit', path: p })).output).toBe(
        `Last edit to ${p} undone successfully. Here's the result of running \`cat -n\` on ${p}:\n     1\tone\n     2\tins\n     3\t\t2\n     4\tthree\n     5\t\n`,
      );
      await edit({ command: 'undo_edit', path: p });
      await edit({ command: 'undo_edit', path: p });
      expect(readFileSync(join(home(), 'e/a.py'), 'utf8')).toBe('one\n\ttwo\nthree\n');
      await edit({ command: 'undo_edit', path: p }); // the create
      expect((await edit({ command: 'undo_edit', path: p })).error).toBe(
        `No edit history found for ${p}.`,
      );
    });

    it('validates parameters and view_range with the well-known messages', async () => {
      const p = '/home/user/e/b.txt';
      await edit({ command: 'create', path: p, file_text: 'a\nb\nc' });
      const cases: [Parameters<typeof edit>[0], string][] = [
        [
          { command: 'view', path: '/home/user/nope' },
          'The path /home/user/nope does not exist. Please provide a valid path.',
        ],
        [
          { command: 'create', path: 'e/x' },
          'Parameter `file_text` is required for command: create',
        ],
        [
          { command: 'str_replace', path: p },
          'Parameter `old_str` is required for command: str_replace',
        ],
        [
          { command: 'insert', path: p, new_str: 'x' },
          'Parameter `insert_line` is required for command: insert',
        ],
        [
          { command: 'insert', path: p, insert_line: 1 },
          'Parameter `new_str` is required for command: insert',
        ],
        [
          { command: 'view', path: p, view_range: [1] },
          'Invalid `view_range`. It should be a list of two integers.',
        ],
        [
          { command: 'view', path: p, view_range: [0, 2] },
          'Invalid `view_range`: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 3]',
        ],
        [
          { command: 'view', path: p, view_range: [1, 9] },
          'Invalid `view_range`: [1, 9]. Its second element `9` should be smaller than the number of lines in the file: `3`',
        ],
        [
          { command: 'view', path: p, view_range: [3, 2] },
          'Invalid `view_range`: [3, 2]. Its second element `2` should be larger or equal than its first `3`',
        ],
        [
          { command: 'str_replace', path: 'e', old_str: 'x' },
          'The path /home/user/e is a directory and only the `view` command can be used on directories',
        ],
        [
          { command: 'view', path: 'e', view_range: [1, 2] },
          'The `view_range` parameter is not allowed when `path` points to a directory.',
        ],
      ];
      for (const [req, message] of cases) expect((await edit(req)).error).toBe(message);
    });

    it('views a directory two levels deep without hidden items', async () => {
      mkdirSync(join(home(), 'tree/sub/deeper'), { recursive: true });
      writeFileSync(join(home(), 'tree/sub/deeper/x'), '');
      writeFileSync(join(home(), 'tree/f.txt'), '');
      writeFileSync(join(home(), 'tree/.hidden'), '');
      const r = await edit({ command: 'view', path: 'tree' });
      expect(r.output).toBe(
        "Here's the files and directories up to 2 levels deep in /home/user/tree, excluding hidden items:\n" +
          '/home/user/tree\n/home/user/tree/f.txt\n/home/user/tree/sub\n/home/user/tree/sub/deeper\n\n',
      );
    });
  });

  describe('file', () => {
    it('read, write, append, exists, create and binary mode', async () => {
      expect((await file({ command: 'write', path: 'f/one.txt', content: 'héllo\n' })).output).toBe(
        'Wrote 7 bytes to /home/user/f/one.txt',
      );
      expect((await file({ command: 'append', path: 'f/one.txt', content: 'more\n' })).output).toBe(
        'Appended 5 bytes to /home/user/f/one.txt',
      );
      expect((await file({ command: 'read', path: '/home/user/f/one.txt' })).output).toBe(
        'héllo\nmore\n',
      );
      expect((await file({ command: 'read', path: 'f/one.txt', line_numbers: true })).output).toBe(
        '     1\théllo\n     2\tmore',
      );
      expect((await file({ command: 'read', path: 'f/one.txt', encoding: 'latin-1' })).output).toBe(
        'hÃ©llo\nmore\n',
      );
      const bin = await file({ command: 'read', path: 'f/one.txt', mode: 'binary' });
      expect(bin).toEqual({
        output: Buffer.from('héllo\nmore\n').toString('base64'),
        system: 'binary',
      });
      await file({
        command: 'write',
        path: 'f/b.bin',
        mode: 'binary',
        content: Buffer.from([0, 255, 1]).toString('base64'),
      });
      expect([...readFileSync(join(home(), 'f/b.bin'))]).toEqual([0, 255, 1]);
      expect(
        (await file({ command: 'write', path: 'f/b.bin', mode: 'binary', content: '@@' })).error,
      ).toMatch(/not valid base64/);
      expect((await file({ command: 'exists', path: 'f/one.txt' })).output).toBe('True');
      expect((await file({ command: 'exists', path: 'f/none' })).output).toBe('False');
      expect((await file({ command: 'create', path: 'f/new.txt', content: 'n' })).output).toBe(
        'File created successfully at: /home/user/f/new.txt',
      );
      expect((await file({ command: 'create', path: 'f/new.txt', content: 'n' })).error).toMatch(
        /File already exists at: \/home\/user\/f\/new.txt/,
      );
      expect((await file({ command: 'read', path: 'f/none' })).error).toBe(
        'No such file or directory: /home/user/f/none',
      );
      expect((await file({ command: 'write', path: 'f/x' })).error).toBe(
        'Parameter `content` is required for command: write',
      );
      expect((await file({ command: 'read', path: 'f/one.txt', mode: 'weird' })).error).toMatch(
        /Invalid mode/,
      );
    });

    it('list, mkdir, rmdir, delete, move and copy', async () => {
      expect((await file({ command: 'mkdir', path: 'g/a/b' })).output).toBe(
        'Created directory /home/user/g/a/b',
      );
      expect((await file({ command: 'mkdir', path: 'g/a/b' })).output).toBe(
        'Created directory /home/user/g/a/b',
      );
      await file({ command: 'write', path: 'g/z.txt', content: 'z' });
      await file({ command: 'write', path: 'g/a/in.txt', content: 'i' });
      expect((await file({ command: 'list', path: 'g' })).output).toBe('a/\nz.txt');
      expect((await file({ command: 'rmdir', path: 'g/a' })).error).toMatch(
        /^Directory not empty: \/home\/user\/g\/a/,
      );
      expect((await file({ command: 'rmdir', path: 'g/a/b' })).output).toBe(
        'Removed directory /home/user/g/a/b',
      );
      expect((await file({ command: 'move', src: 'g/z.txt', dst: 'g/moved/z2.txt' })).output).toBe(
        'Moved /home/user/g/z.txt to /home/user/g/moved/z2.txt',
      );
      expect((await file({ command: 'copy', src: 'g/moved/z2.txt', dst: 'g/a' })).output).toBe(
        'Copied /home/user/g/moved/z2.txt to /home/user/g/a',
      );
      expect(readFileSync(join(home(), 'g/a/z2.txt'), 'utf8')).toBe('z');
      expect((await file({ command: 'copy', src: 'g/a', dst: '/tmp/g-copy' })).output).toBe(
        'Copied /home/user/g/a to /tmp/g-copy',
      );
      expect(readdirSync(join(inst.rt.sandbox.hostTmp, 'g-copy')).sort()).toEqual([
        'in.txt',
        'z2.txt',
      ]);
      expect(
        (await file({ command: 'copy', src: '/etc/hostname', dst: 'g/hostname' })).output,
      ).toMatch(/^Copied/);
      expect((await file({ command: 'delete', path: 'g/a' })).error).toMatch(
        /^Directory not empty/,
      );
      expect((await file({ command: 'delete', path: 'g/a', recursive: true })).output).toBe(
        'Deleted /home/user/g/a',
      );
      expect((await file({ command: 'delete', path: 'g/moved/z2.txt' })).output).toBe(
        'Deleted /home/user/g/moved/z2.txt',
      );
      expect((await file({ command: 'list', path: 'g' })).output).toBe('hostname\nmoved/');
      expect(
        (await file({ command: 'delete', path: '/home/user', recursive: true })).error,
      ).toMatch(/Refusing to remove/);
      expect((await file({ command: 'move', src: '/etc/hostname', dst: 'h' })).error).toMatch(
        /Access denied: \/etc\/hostname is read-only/,
      );
    });

    it('view, replace, insert, delete_lines and undo', async () => {
      await file({ command: 'write', path: 't.txt', content: 'a\nb\nc\nb\n' });
      expect((await file({ command: 'view', path: 't.txt' })).output).toBe(
        '     1\ta\n     2\tb\n     3\tc\n     4\tb',
      );
      expect((await file({ command: 'view', path: 't.txt', view_range: [2, 3] })).output).toBe(
        '     2\tb\n     3\tc',
      );
      expect((await file({ command: 'view', path: 't.txt', view_range: [5, 6] })).error).toMatch(
        /^Invalid `view_range`: \[5, 6\]/,
      );
      expect(
        (await file({ command: 'replace', path: 't.txt', old_str: 'b', new_str: 'B' })).output,
      ).toBe('Replaced 1 occurrence of old_str in /home/user/t.txt');
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nB\nc\nb\n');
      expect(
        (
          await file({
            command: 'replace',
            path: 't.txt',
            old_str: '\n',
            new_str: ';',
            all_occurrences: true,
          })
        ).output,
      ).toBe('Replaced 4 occurrences of old_str in /home/user/t.txt');
      expect((await file({ command: 'replace', path: 't.txt', old_str: 'zz' })).error).toMatch(
        /did not appear verbatim/,
      );
      expect((await file({ command: 'undo', path: 't.txt' })).output).toBe(
        'Last edit to /home/user/t.txt undone successfully.',
      );
      expect((await file({ command: 'insert', path: 't.txt', line: 2, text: 'x\ny' })).output).toBe(
        'Inserted 2 lines at line 2 of /home/user/t.txt',
      );
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nx\ny\nB\nc\nb\n');
      await file({ command: 'insert', path: 't.txt', line: 7, text: 'end' });
      expect((await file({ command: 'insert', path: 't.txt', line: 9, text: 'e' })).error).toMatch(
        /Invalid line 9/,
      );
      expect(
        (await file({ command: 'delete_lines', path: 't.txt', lines: [2, 3, 7] })).output,
      ).toBe('Deleted 3 lines from /home/user/t.txt');
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nB\nc\nb\n');
      expect((await file({ command: 'delete_lines', path: 't.txt', lines: [9] })).error).toMatch(
        /Invalid line numbers \[9\]/,
      );
      await file({ command: 'undo', path: 't.txt' });
      await file({ command: 'undo', path: 't.txt' });
      await file({ command: 'undo', path: 't.txt' });
      await file({ command: 'undo', path: 't.txt' });
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nb\nc\nb\n');
      expect((await file({ command: 'undo', path: 't.txt' })).error).toBe(
        'No edit history found for /home/user/t.txt.',
      );
    });

    it('grep with regex, case, recursion and line numbers', async () => {
      await file({ command: 'write', path: 'gr/a.txt', content: 'Alpha 1\nbeta 22\n' });
      await file({ command: 'write', path: 'gr/sub/b.txt', content: 'alpha 333\n' });
      expect((await file({ command: 'grep', pattern: '\\d{2,}', path: 'gr/a.txt' })).output).toBe(
        '/home/user/gr/a.txt:2:beta 22',
      );
      expect((await file({ command: 'grep', pattern: 'alpha', path: 'gr' })).error).toMatch(
        /is a directory; set recursive/,
      );
      const all = await file({
        command: 'grep',
        pattern: 'alpha',
        path: 'gr',
        recursive: true,
        case_sensitive: false,
      });
      expect(all.output!.split('\n').sort()).toEqual([
        '/home/user/gr/a.txt:1:Alpha 1',
        '/home/user/gr/sub/b.txt:1:alpha 333',
      ]);
      expect(
        (await file({ command: 'grep', pattern: 'beta', path: 'gr/a.txt', line_numbers: false }))
          .output,
      ).toBe('/home/user/gr/a.txt:beta 22');
      expect(
        (await file({ command: 'grep', pattern: 'gamma', path: 'gr', recursive: true })).output,
      ).toBe('No matches found');
      expect(
        (await file({ command: 'grep', pattern: '(unclosed', path: 'gr/a.txt' })).error,
      ).toMatch(/grep/);
    });

    it('answers an unknown command with the supported ones', async () => {
      expect((await file({ command: 'frobnicate' })).error).toBe(
        "Unknown command 'frobnicate'. Supported commands: read, write, append, delete, exists, list, mkdir, rmdir, move, copy, view, create, replace, insert, delete_lines, undo, grep",
      );
    });
  });

  describe('paths', () => {
    it('refuses to write outside home and tmp, reads what the sandbox can read', async () => {
      expect((await file({ command: 'write', path: '/etc/burrow-x', content: 'x' })).error).toBe(
        'Access denied: /etc/burrow-x is read-only (writes are allowed only under /home/user and /tmp)',
      );
      expect(
        (await file({ command: 'write', path: '../../../etc/burrow-x', content: 'x' })).error,
      ).toMatch(/Access denied: \/etc\/burrow-x is read-only/);
      expect(
        (await edit({ command: 'create', path: '/usr/burrow-x', file_text: 'x' })).error,
      ).toMatch(/Access denied/);
      // the instance's generated /etc, not the host's
      expect((await file({ command: 'read', path: '/etc/hostname' })).output).toBe('burrow\n');
      expect((await file({ command: 'read', path: '/proc/self/environ' })).error).toMatch(
        /Access denied/,
      );
      expect(
        (await file({ command: 'read', path: `${inst.data}/auth_states/secret.json` })).error,
      ).toMatch(/No such file|Access denied/);
      // the host's /root does not exist inside
      expect(existsSync('/root')).toBe(true);
      expect((await file({ command: 'list', path: '/root' })).error).toBe(
        'No such file or directory: /root',
      );
      expect(existsSync('/etc/burrow-x') || existsSync('/usr/burrow-x')).toBe(false);
    });

    it('resolves symlinks planted by bash as the sandbox does, never reaching outside', async () => {
      // links to the data dir's host path: nothing is there inside (its /tmp is its own disk's)
      const secret = `${inst.data}/auth_states/secret.json`;
      await bash({
        command: `mkdir -p links && cd links && ln -sfn / root && ln -sfn /etc etc && ln -sfn ${inst.data} data && ln -sfn ${secret} secret && ln -sfn ../../../.. up && ln -sfn /home/user/links/loop loop && ln -sfn /home/user/real inhome && mkdir -p ../real && echo hi > ../real/f && cd ~`,
      });
      expect(
        (await file({ command: 'write', path: 'links/root/etc/burrow-x', content: 'x' })).error,
      ).toMatch(/Access denied: \/home\/user\/links\/root\/etc\/burrow-x is read-only/);
      expect(
        (await file({ command: 'write', path: 'links/etc/passwd', content: 'x' })).error,
      ).toMatch(/Access denied/);
      expect(
        (await file({ command: 'write', path: 'links/up/etc/burrow-x', content: 'x' })).error,
      ).toMatch(/Access denied/);
      expect((await file({ command: 'read', path: 'links/secret' })).error).toBeDefined();
      expect((await file({ command: 'read', path: 'links/secret' })).output).toBeUndefined();
      expect(
        (await file({ command: 'read', path: 'links/data/auth_states/secret.json' })).output,
      ).toBeUndefined();
      expect((await file({ command: 'read', path: 'links/loop' })).error).toMatch(
        /Too many levels of symbolic links/,
      );
      // a link inside home, absolute in sandbox terms, works
      expect((await file({ command: 'read', path: 'links/inhome/f' })).output).toBe('hi\n');
      expect((await file({ command: 'write', path: 'links/inhome/g', content: 'g' })).output).toBe(
        'Wrote 1 bytes to /home/user/links/inhome/g',
      );
      expect(readFileSync(join(home(), 'real/g'), 'utf8')).toBe('g');
      // delete removes the link, not its target
      expect((await file({ command: 'delete', path: 'links/etc' })).output).toBe(
        'Deleted /home/user/links/etc',
      );
      expect(existsSync('/etc/passwd')).toBe(true);
      expect(() => lstatSync(join(home(), 'links/etc'))).toThrow();
      // copying a directory that holds hidden paths or an instance root is refused: / always
      // holds the destination, /home holds /home/user
      expect((await file({ command: 'copy', src: '/', dst: 'rootcopy' })).error).toBe(
        'Cannot copy / into itself',
      );
      expect((await file({ command: 'copy', src: '/home', dst: '/tmp/homecopy' })).error).toBe(
        'Cannot copy /home: it contains paths this instance cannot access',
      );
      expect(existsSync(join(home(), 'rootcopy'))).toBe(false);
      expect(existsSync(join(rt.sandbox.hostTmp, 'homecopy'))).toBe(false);
      const r = await bash({ command: 'cat links/secret' });
      expect(r.output).toBe('');
      expect(readFileSync(secret, 'utf8')).toBe('{"cookie":"s3cret"}');
    });

    it('writes atomically: no temp files are left behind', async () => {
      await file({ command: 'write', path: 'atomic/x.txt', content: 'x'.repeat(100_000) });
      await edit({
        command: 'str_replace',
        path: 'atomic/x.txt',
        old_str: 'x'.repeat(100_000),
        new_str: 'y',
      });
      expect(readdirSync(join(home(), 'atomic'))).toEqual(['x.txt']);
    });
  });

  describe('pause', () => {
    it('freezes every process and resume continues', async () => {
      await bash({
        command:
          '(i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.05; done) > /dev/null 2>&1 &',
      });
      const read = () => Number(readFileSync(join(inst.rt.sandbox.hostTmp, 'counter'), 'utf8'));
      const states = (pids: number[]) => pids.map(processState).filter((s) => s !== '');
      // the loop's pace on this machine now: how long it takes to count three more
      await eventually(() => existsSync(join(inst.rt.sandbox.hostTmp, 'counter')), 'the counter');
      const first = read();
      const began = performance.now();
      await eventually(() => read() >= first + 3, 'three counts');
      const threeCounts = performance.now() - began;
      expect(instanceFrozen(inst.id)).toBe(false);
      await rt.pause();
      const frozen = read();
      // frozen for as long as it took to count three times, three times over (0.5 s at least)
      await sleep(Math.max(500, 3 * threeCounts));
      expect(read()).toBe(frozen);
      // the whole cgroup is frozen; its members (every process of the instance: bash, Xvfb, the
      // counter loop) show `D` under the v1 freezer (`T` if stopped by a signal instead)
      expect(instanceFrozen(inst.id)).toBe(true);
      const pids = instancePids(inst.id);
      expect(pids).toEqual(expect.arrayContaining(rt.sandbox.pids()));
      expect(pids.length).toBeGreaterThan(5);
      for (const state of states(pids)) expect(['D', 'T', 'Z']).toContain(state);
      await rt.resume();
      expect(instanceFrozen(inst.id)).toBe(false);
      await eventually(() => read() > frozen, 'the counter to go on');
      expect(states(instancePids(inst.id)).filter((s) => s === 'S').length).toBeGreaterThan(0);
      expect((await bash({ command: 'echo resumed' })).output).toBe('resumed\n');
    });
  });
});

describe('ubuntu runtime lifecycle', () => {
  it('stop leaves no process: bwrap, bash, Xvfb and detached children', async () => {
    const inst = await startInstance({}, [640, 481]);
    const xvfb = () => pidsMatching('Xvfb -screen 0 640x481x24');
    try {
      await inst.rt.tools.bash({
        command: 'sleep 1000 & setsid sleep 1001 & nohup sleep 1002 >/dev/null 2>&1 &',
      });
      await inst.rt.tools.bash({ command: 'sleep 30', timeout: 0.2, session: 2 });
      // the timed-out command keeps running in its shell (on a loaded machine it may still be
      // starting when the call returns)
      await eventually(
        () => instancePids(inst.id).map(commandLine).includes('sleep 30'),
        'the timed-out command to run',
      );
      // every process of the instance: its cgroup and the host-side wrappers naming its id
      const pids = instancePids(inst.id);
      const commands = pids.map(commandLine);
      expect(pids.length).toBeGreaterThan(8);
      expect(pids).toEqual(expect.arrayContaining(inst.rt.sandbox.pids()));
      expect(commands.filter((c) => /^sleep 100[012]$/.test(c)).sort()).toEqual([
        'sleep 1000',
        'sleep 1001',
        'sleep 1002',
      ]);
      expect(commands).toContain('sleep 30');
      // one bubblewrap each for Xvfb and the two shells
      expect(commands.filter((c) => c.includes('bwrap ')).length).toBeGreaterThanOrEqual(3);
      expect(xvfb().length).toBeGreaterThan(0);
      await inst.rt.stop();
      await inst.rt.stop(); // idempotent
      expect(pids.filter(alive)).toEqual([]);
      expect(instancePids(inst.id)).toEqual([]);
      expect(xvfb()).toEqual([]);
      await expect(inst.rt.tools.bash({ command: 'true' })).rejects.toThrow(/stopped/);
      expect(inst.failures).toEqual([]);
    } finally {
      await cleanUp(inst);
    }
  });

  it('every process dies with the server, also on SIGKILL', async () => {
    const data = mkdtempSync(join(tmpdir(), 'burrow-ubuntu-kill-'));
    const script = join(data, 'server.mts');
    const entry = new URL('../../../src/server/ubuntu/index.ts', import.meta.url).pathname;
    const sandboxEntry = new URL('../../../src/server/sandbox/index.ts', import.meta.url).pathname;
    writeFileSync(
      script,
      `import { mkdirSync } from 'node:fs';
import { UbuntuRuntime } from ${JSON.stringify(entry)};
import { SandboxHost } from ${JSON.stringify(sandboxEntry)};
const runDir = ${JSON.stringify(join(data, 'instances'))} + '/run-' + process.pid + '-k';
const dir = runDir + '/k1';
mkdirSync(dir, { recursive: true });
const log = { info() {}, warn() {}, error() {}, debug() {} };
const sandboxHost = await SandboxHost.create({ runDir, log });
const rt = new UbuntuRuntime({
  instance: { id: 'k1', type: 'ubuntu', dir, token: 't' },
  plan: { resolution: [640, 482], blockedDomains: [], pooled: false, extensions: [] },
  services: { publicUrl: 'http://x', log, chromiumPath: '', maxUploadBytes: 1, failed() {}, sandboxHost },
});
await rt.start();
await rt.tools.bash({ command: 'setsid sleep 1003 & sleep 1004 &' });
console.log(JSON.stringify(rt.sandbox.pids()));
setInterval(() => {}, 1000);
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const pids = await new Promise<number[]>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('\n')) resolve(JSON.parse(out) as number[]);
      });
      child.once('exit', () => reject(new Error(`server exited early: ${out}`)));
    });
    try {
      expect(pids.length).toBeGreaterThan(5);
      child.kill('SIGKILL');
      // the kernel ends them once the server is gone (a wait for that, not a bound on it)
      await eventually(() => !pids.some(alive), 'its processes to end', 30_000).catch(() => {});
      expect(pids.filter(alive)).toEqual([]);
      expect(() => execFileSync('pgrep', ['-f', 'Xvfb -screen 0 640x482x24'])).toThrow();
    } finally {
      child.kill('SIGKILL');
      rmSync(data, { recursive: true, force: true });
    }
  });
});

describe('ubuntu runtime without isolation (disableIsolation)', () => {
  // ISOLATION.md, "Without isolation": processes are plain children of the server with its uid,
  // network and file system; nothing is masked, so this mode no longer promises that the data
  // dir is unreadable (the old bubblewrap-without-namespaces mode hid it). What it still
  // promises: HOME and TMPDIR in the instance directory, the file tools writing only under them,
  // and stop ending every process.
  it('runs bash with HOME in the instance and the file tools write only under home and tmp', async () => {
    const inst = await startInstance({ disableIsolation: true }, [640, 483]);
    try {
      const { sandbox } = inst.rt;
      expect(sandbox.mode).toBe('none');
      const home = sandbox.hostHome;
      const tmp = sandbox.hostTmp;
      const dir = realpathSync(inst.dir);
      expect(home.startsWith(`${dir}/`)).toBe(true);
      expect(tmp.startsWith(`${dir}/`)).toBe(true);
      const r = await inst.rt.tools.bash({
        command: 'echo $HOME; pwd; echo $TMPDIR; echo hi > f.txt; echo $DISPLAY',
      });
      expect(r.output).toBe(`${home}\n${home}\n${tmp}\n:${inst.rt.display.number}\n`);
      expect(readFileSync(join(home, 'f.txt'), 'utf8')).toBe('hi\n');
      expect((await inst.rt.tools.file({ command: 'read', path: 'f.txt' })).output).toBe('hi\n');
      expect(
        (await inst.rt.tools.file({ command: 'write', path: `${tmp}/t.txt`, content: 't' })).output,
      ).toBe(`Wrote 1 bytes to ${tmp}/t.txt`);
      expect(readFileSync(join(tmp, 't.txt'), 'utf8')).toBe('t');
      const refused = [
        '/etc/burrow-x',
        `${inst.data}/burrow-x`, // the data dir, next to the instance
        `${dir}/burrow-x`, // the instance directory itself, outside home and tmp
        '/tmp/burrow-x', // the host's /tmp: the instance's tmp is its own
        `${home}/../burrow-x`,
      ];
      for (const path of refused) {
        expect((await inst.rt.tools.file({ command: 'write', path, content: 'x' })).error).toMatch(
          /^Access denied: .* is read-only \(writes are allowed only under /,
        );
      }
      expect(refused.filter((p) => existsSync(p) || existsSync(join(dir, 'burrow-x')))).toEqual([]);
      const pids = inst.rt.sandbox.pids();
      expect(pids.length).toBeGreaterThan(1);
      await inst.rt.stop();
      expect(pids.filter(alive)).toEqual([]);
      expect(pidsMatching('Xvfb -screen 0 640x483x24')).toEqual([]);
    } finally {
      await cleanUp(inst);
    }
  });
});
