/**
 * The ubuntu runtime's life and death, driven directly (no HTTP): stop leaves no process of the
 * instance, none outlives a killed server, and without isolation (disableIsolation) the file
 * tools still write only under the instance's home and tmp.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive } from '../../../src/internal/process.js';
import { eventually, instancePids, pidsMatching } from '../../helpers/server.js';
import { cleanUp, startInstance } from './ubuntu-runtime-harness.js';

/** The command line of `pid`, arguments joined by spaces ('' once it is gone). */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}
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
