/**
 * A sandbox's stop (src/server/sandbox/sandbox.ts) kills a whole process tree inside: commands,
 * their children, orphans that pid 1 adopted, and pid 1. The processes inside die first and the
 * stop waits only for those pid 1 does not reap itself; it used to wait for pid 1's own `sleep`
 * too, which pid 1 starts again as soon as it is killed, so every stop ran into its 3 s timeout
 * (and said nothing). A stop that runs into it now logs it, and this test reads the log.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, SandboxHost } from '../../../src/server/sandbox/index.js';
import { eventually, instancePids } from '../../helpers/server.js';

const warnings: string[] = [];
const log = {
  info() {},
  debug() {},
  error() {},
  warn(obj: unknown, msg?: string) {
    warnings.push(typeof obj === 'string' ? obj : (msg ?? JSON.stringify(obj)));
  },
};

let data: string;
let host: SandboxHost;

beforeAll(async () => {
  data = mkdtempSync(join(tmpdir(), 'burrow-stop-'));
  const runDir = join(data, `run-${process.pid}-${randomBytes(4).toString('hex')}`);
  mkdirSync(runDir);
  host = await SandboxHost.create({ runDir, log, diskStock: 0 });
});

afterAll(async () => {
  await host?.close();
  rmSync(data, { recursive: true, force: true });
});

describe('a sandbox stop', () => {
  it('kills commands, their children, adopted orphans and pid 1 without running out its wait', async () => {
    expect(host.isolated).toBe(true);
    for (let round = 0; round < 3; round++) {
      const name = `inst_stop${randomBytes(6).toString('hex')}`;
      const dir = mkdtempSync(join(data, 'inst-'));
      const sandbox = await Sandbox.create(host, { dir, name, log });
      const env = { PATH: '/usr/bin:/bin' };
      // a command with children, and one that leaves an orphan for pid 1 to adopt
      sandbox.spawn(['/bin/sh', '-c', 'sleep 300 & sleep 301 & wait'], { env });
      const orphaned = sandbox.exec(['/bin/sh', '-c', 'setsid sleep 302 > /dev/null 2>&1 &'], {
        env,
        timeoutMs: 10_000,
      });
      await orphaned;
      await eventually(() => instancePids(name).length >= 6, 'the processes to run');
      await sandbox.stop();
      expect(instancePids(name)).toEqual([]);
    }
    expect(warnings.filter((w) => /still ran/.test(w))).toEqual([]);
  });
});
