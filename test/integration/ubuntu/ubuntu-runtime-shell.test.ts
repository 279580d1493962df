/**
 * The ubuntu runtime driven directly (no HTTP) in its sandbox (../../src/server/sandbox/ISOLATION.md):
 * what the sandbox shows it (home, tmp, /etc, its own process tree), Xvfb and its cookie, bash
 * sessions, env, and pause/resume. Two tests here time the machine against itself
 * (test/busy-machine.list): a bash call's timeout, and how long a pause holds.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processState } from '../../../src/internal/process.js';
import type { UbuntuRuntime } from '../../../src/server/ubuntu/index.js';
import { MAX_SESSIONS } from '../../../src/server/ubuntu/tools/bash.js';
import { eventually, instanceFrozen, instancePids } from '../../helpers/server.js';
import { startInstance, stopChecked, toolsOf, type Instance } from './ubuntu-runtime-harness.js';

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

describe('ubuntu runtime in its sandbox', () => {
  let inst: Instance;
  let rt: UbuntuRuntime;
  const { bash } = toolsOf(() => inst);

  beforeAll(async () => {
    inst = await startInstance();
    rt = inst.rt;
  });

  afterAll(() => stopChecked(inst));

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
