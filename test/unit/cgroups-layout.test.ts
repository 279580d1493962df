/**
 * Where instance cgroups go: under the server's own cgroup, never at a fixed path at the root of
 * a hierarchy. The v2 path is checked on a fake cgroupfs (a directory with the files the kernel
 * would show), because this machine's cgroup v2 mount has no controllers: what is checked here is
 * the path logic (which directories, which files written with what), not the kernel's answers.
 * The v1 path runs for real in every isolated instance test on this machine.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cgroupLayout,
  parseProcCgroup,
  prepareCgroups,
  probeCgroups,
  SERVER_LEAF,
} from '../../src/server/sandbox/cgroups.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fake unified hierarchy: the server in `own`, with `controllers` offered there. */
function fakeV2(own: string, controllers: string, opts: { root?: boolean } = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'cgfs-'));
  dirs.push(root);
  writeFileSync(join(root, 'cgroup.controllers'), 'cpuset cpu io memory hugetlb pids rdma misc\n');
  const dir = join(root, own);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'cgroup.controllers'), `${controllers}\n`);
  writeFileSync(join(dir, 'cgroup.procs'), '');
  writeFileSync(join(dir, 'cgroup.subtree_control'), '');
  if (!opts.root) writeFileSync(join(dir, 'cgroup.type'), 'domain\n');
  return root;
}

describe('parseProcCgroup', () => {
  it('reads v1 controllers (also joined ones) and the unified path', () => {
    const own = parseProcCgroup(
      '9:name=systemd:/\n8:pids:/job\n4:memory:/process_api/0b0b\n2:cpu,cpuacct:/x\n0::/user.slice/s.scope\n',
    );
    expect(own.v1.get('memory')).toBe('/process_api/0b0b');
    expect(own.v1.get('cpu')).toBe('/x');
    expect(own.v1.get('cpuacct')).toBe('/x');
    expect(own.v1.get('pids')).toBe('/job');
    expect(own.v2).toBe('/user.slice/s.scope');
  });
});

describe('cgroup v2 (fake cgroupfs)', () => {
  const self = '0::/user.slice/user-1002.slice/user@1002.service/app.slice/burrow.scope\n';
  const own = 'user.slice/user-1002.slice/user@1002.service/app.slice/burrow.scope';

  it('instances go under the server own cgroup, which it leaves for a leaf before enabling controllers', async () => {
    const root = fakeV2(own, 'cpu memory pids');
    const found = cgroupLayout(root, self);
    expect(found).toEqual({
      layout: { version: 2, parents: [join(root, own, 'burrow')], own: join(root, own) },
    });
    const probed = probeCgroups(root, self);
    expect('layout' in probed).toBe(true);
    if (!('layout' in found)) throw new Error('no layout');
    await prepareCgroups(found.layout, 4242);
    expect(readFileSync(join(root, own, SERVER_LEAF, 'cgroup.procs'), 'utf8')).toBe('4242\n');
    expect(readFileSync(join(root, own, 'cgroup.subtree_control'), 'utf8')).toBe(
      '+memory +pids +cpu',
    );
    expect(readFileSync(join(root, own, 'burrow', 'cgroup.subtree_control'), 'utf8')).toBe(
      '+memory +pids +cpu',
    );
  });

  it("the hierarchy's real root (no cgroup.type) keeps the server where it is", async () => {
    const root = fakeV2('', 'cpu memory pids', { root: true });
    const found = cgroupLayout(root, '0::/\n');
    if (!('layout' in found)) throw new Error('no layout');
    expect(found.layout.parents).toEqual([join(root, 'burrow')]);
    await prepareCgroups(found.layout, 4242);
    expect(() => readFileSync(join(root, SERVER_LEAF, 'cgroup.procs'))).toThrow();
    expect(readFileSync(join(root, 'cgroup.subtree_control'), 'utf8')).toBe('+memory +pids +cpu');
  });

  it('a cgroup without the controllers (not delegated) says so and names the fix', () => {
    const root = fakeV2(own, 'cpu');
    const found = cgroupLayout(root, self);
    expect('why' in found && found.why).toMatch(/has no memory, pids controller.*Delegate=yes/);
  });
});

describe('cgroup v1 (fake cgroupfs)', () => {
  it('one parent per controller, each under the server own cgroup of that controller', () => {
    const root = mkdtempSync(join(tmpdir(), 'cgfs-'));
    dirs.push(root);
    for (const c of ['memory', 'pids', 'cpu', 'freezer']) {
      mkdirSync(join(root, c), { recursive: true });
      writeFileSync(join(root, c, 'cgroup.procs'), '');
    }
    const found = cgroupLayout(root, '8:pids:/\n4:memory:/process_api/ab\n1:cpu:/\n6:freezer:/\n');
    expect(found).toEqual({
      layout: {
        version: 1,
        parents: [
          join(root, 'memory/process_api/ab/burrow'),
          join(root, 'pids/burrow'),
          join(root, 'cpu/burrow'),
          join(root, 'freezer/burrow'),
        ],
      },
    });
  });
});
