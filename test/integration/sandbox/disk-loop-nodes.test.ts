/**
 * An instance disk where `/dev` has no node for the free loop devices, as in a container: its
 * `/dev` is a copy made at its start, and the loop devices the kernel adds later appear only on
 * the host. The disk is made anyway (sandbox/quota.ts gives the kernel's next free loop device a
 * node); before that fix every start there failed with "failed to setup loop device" once the
 * nodes that existed were taken.
 *
 * The server side runs in a mount namespace of its own whose `/dev` is a tmpfs holding only
 * `null`, `zero`, `urandom` and `loop-control` (no `loopN` at all), so it is the real mount path
 * with the real kernel, in the situation a container is in.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'burrow-loopnodes-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Run `script` (JavaScript, ESM, with tsx) in a mount namespace whose /dev has no loop nodes. */
function inBareDev(script: string): string {
  const setup = [
    'set -e',
    'mount --make-rprivate /',
    'mount -t tmpfs -o mode=0755 none /dev',
    'mknod -m 0666 /dev/null c 1 3',
    'mknod -m 0666 /dev/zero c 1 5',
    'mknod -m 0666 /dev/urandom c 1 9',
    'mknod -m 0660 /dev/loop-control c 10 237',
    'test -z "$(ls /dev | grep -E "^loop[0-9]")"',
    `exec ${process.execPath} --import tsx --input-type=module -e "$SCRIPT"`,
  ].join('\n');
  return execFileSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', setup], {
    cwd: root,
    env: { ...process.env, SCRIPT: script },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('instance disks without loop device nodes', () => {
  it('are made, written to the quota, and removed', () => {
    const out = inBareDev(`
      import { DiskQuota } from './src/server/sandbox/quota.ts';
      import { writeFileSync, readdirSync, readFileSync } from 'node:fs';
      const q = await DiskQuota.create(${JSON.stringify(join(dir, 'a.img'))}, ${JSON.stringify(join(dir, 'a'))}, 32 * 1024 * 1024);
      writeFileSync(${JSON.stringify(join(dir, 'a', 'hello'))}, 'on the disk');
      const mounted = readFileSync('/proc/self/mounts', 'utf8').split('\\n')
        .find((l) => l.split(' ')[1] === ${JSON.stringify(join(dir, 'a'))});
      const loops = readdirSync('/dev').filter((n) => /^loop\\d+$/.test(n));
      await q.remove();
      console.log(JSON.stringify({ mounted: mounted?.split(' ')[0], loops }));
    `);
    const r = JSON.parse(out.trim().split('\n').pop()!) as { mounted?: string; loops: string[] };
    expect(r.mounted).toMatch(/^\/dev\/loop\d+$/);
    expect(r.loops.length).toBeGreaterThan(0);
    expect(r.loops).toContain(r.mounted!.slice('/dev/'.length));
  });
});
