/**
 * The command helper (src/internal/aside.ts): commands run to their end as `execFile` ran them,
 * but as children of the helper, never of the server's process.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AsideError, asidePid, runAside } from '../../src/internal/aside.js';
import { pidAlive } from '../../src/internal/process.js';
import { eventually } from '../helpers/server.js';

/** The parent pid of a process, from its `stat` (the field after the command's parenthesis). */
const parentOf = (stat: string) => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);

describe('runAside', () => {
  it("answers a command's output, and the command is the helper's child, not this process's", async () => {
    const { stdout, stderr } = await runAside('/bin/sh', ['-c', 'cat /proc/$$/stat; echo e >&2']);
    expect(stderr).toBe('e\n');
    const parent = parentOf(stdout);
    expect(parent).not.toBe(process.pid);
    expect(parent).toBe(asidePid());
    expect(parentOf(readFileSync(`/proc/${parent}/stat`, 'utf8'))).toBe(process.pid);
  });

  it('rejects as execFile did: the status, a missing program, a timeout', async () => {
    const failed = await runAside('/bin/sh', ['-c', 'echo out; echo why >&2; exit 3']).catch(
      (e: unknown) => e,
    );
    expect(failed).toBeInstanceOf(AsideError);
    expect(failed).toMatchObject({ code: 3, stdout: 'out\n', stderr: 'why\n' });
    const missing = await runAside('/no/such/program', []).catch((e: unknown) => e);
    // (setpriv, which ties the command to the helper's life, says 127 where a spawn says ENOENT)
    expect([127, 'ENOENT']).toContain((missing as AsideError).code);
    const began = performance.now();
    const slow = await runAside('/bin/sleep', ['30'], { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(slow).toMatchObject({ signal: 'SIGKILL' });
    expect(performance.now() - began).toBeLessThan(20_000);
  });

  it('several at once each get their own answer', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => runAside('/bin/echo', [String(i)])),
    );
    expect(answers.map((a) => a.stdout)).toEqual(Array.from({ length: 8 }, (_, i) => `${i}\n`));
  });

  it('a helper that died fails what it was running, which dies too, and is started again', async () => {
    await runAside('/bin/true', []);
    const first = asidePid()!;
    const pidFile = join(mkdtempSync(join(tmpdir(), 'aside-')), 'pid');
    const inFlight = runAside('/bin/sh', ['-c', `echo $$ > ${pidFile}; exec sleep 30`]).catch(
      (e: unknown) => e,
    );
    await eventually(
      () => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'),
      'the command started',
    );
    const sleeping = Number(readFileSync(pidFile, 'utf8'));
    expect(pidAlive(sleeping)).toBe(true);
    process.kill(first, 'SIGKILL');
    expect(await inFlight).toMatchObject({ message: expect.stringMatching(/helper exited/) });
    await eventually(() => !pidAlive(sleeping), 'the command died with the helper');
    expect((await runAside('/bin/echo', ['again'])).stdout).toBe('again\n');
    expect(asidePid()).not.toBe(first);
  });
});
