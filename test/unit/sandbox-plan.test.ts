/**
 * The sandbox's spawn plan (src/server/sandbox/plan.ts, rootfs.ts): the mount steps worked out
 * once per server run render to exactly the bubblewrap options each process gets, with the
 * instance's own directories only as the descriptors of that spawn; nothing of the host but the
 * programs (and the font cache, Node) is bound, and nothing of it writable.
 */
import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildSpawnPlan } from '../../src/server/sandbox/plan.js';
import { mountArgs, SANDBOX_HOME, type MountStep } from '../../src/server/sandbox/rootfs.js';

const FDS = { etc: 11, home: 12, tmp: 13, shm: 14 };

describe('mountArgs', () => {
  it('renders each kind of step as its bubblewrap option, in order', () => {
    const steps: MountStep[] = [
      { kind: 'ro-bind', src: '/usr', dest: '/usr' },
      { kind: 'dev-bind', src: '/dev/null', dest: '/dev/null' },
      { kind: 'symlink', target: 'usr/bin', at: '/bin' },
      { kind: 'dir-fd', dir: 'etc', dest: '/etc', readOnly: true },
      { kind: 'dir-fd', dir: 'home', dest: '/home/user', readOnly: false },
      { kind: 'proc', dest: '/proc' },
      { kind: 'dev', dest: '/dev' },
      { kind: 'dir', dest: '/run' },
      { kind: 'remount-ro', dest: '/' },
    ];
    expect(mountArgs(steps, FDS)).toEqual([
      '--ro-bind',
      '/usr',
      '/usr',
      '--dev-bind',
      '/dev/null',
      '/dev/null',
      '--symlink',
      'usr/bin',
      '/bin',
      '--ro-bind-fd',
      '11',
      '/etc',
      '--bind-fd',
      '12',
      '/home/user',
      '--proc',
      '/proc',
      '--dev',
      '/dev',
      '--dir',
      '/run',
      '--remount-ro',
      '/',
    ]);
  });

  it('refuses a step that binds an instance directory it was given no descriptor for', () => {
    const steps: MountStep[] = [{ kind: 'dir-fd', dir: 'tmp', dest: '/tmp', readOnly: false }];
    expect(() => mountArgs(steps)).toThrow('no descriptor for tmp');
    expect(() => mountArgs(steps, { ...FDS, tmp: undefined as unknown as number })).toThrow(
      'no descriptor for tmp',
    );
  });
});

describe('the spawn plan built on this host', () => {
  const plan = buildSpawnPlan();

  it('names each tool of the chain by an absolute path that exists', () => {
    for (const tool of ['perl', 'nsenter', 'setpriv', 'bwrap'] as const) {
      expect(plan.tools[tool]).toMatch(/^\//);
      expect(existsSync(plan.tools[tool]), tool).toBe(true);
    }
  });

  it("gives an instance's processes the programs read-only and only its own four directories", () => {
    const args = mountArgs(plan.instance, FDS);
    expect(args.slice(0, 3)).toEqual(['--ro-bind', '/usr', '/usr']);
    // the only writable binds are the instance's home, /tmp and /dev/shm, by descriptor
    const writable = plan.instance.filter((s) => s.kind === 'dir-fd' && !s.readOnly) as Extract<
      MountStep,
      { kind: 'dir-fd' }
    >[];
    expect(writable.map((s) => [s.dir, s.dest])).toEqual([
      ['shm', '/dev/shm'],
      ['home', SANDBOX_HOME],
      ['tmp', '/tmp'],
    ]);
    expect(plan.instance).toContainEqual({
      kind: 'dir-fd',
      dir: 'etc',
      dest: '/etc',
      readOnly: true,
    });
    // host paths are bound read-only, and only the programs, the font cache and Node's prefix
    for (const s of plan.instance) {
      if (s.kind === 'ro-bind') {
        expect(s.src).toBe(s.dest);
        expect(s.src).toMatch(/^\/(usr|bin|sbin|lib\w*|var\/cache\/fontconfig)$|^\/.*node/);
      }
      expect(['bind', 'dev-bind']).not.toContain(s.kind);
    }
    expect(args).toEqual(
      expect.arrayContaining(['--proc', '/proc', '--dev', '/dev', '--dir', '/run']),
    );
    // no other file system is made for it (a tmpfs would be writable memory outside its quota),
    // and bubblewrap's own root and /dev become read-only after every step that adds to them
    expect(plan.instance.some((s) => (s.kind as string) === 'tmpfs')).toBe(false);
    expect(plan.instance.slice(-2)).toEqual([
      { kind: 'remount-ro', dest: '/dev' },
      { kind: 'remount-ro', dest: '/' },
    ]);
  });

  it("gives pid 1 the programs and /dev/null, none of the instance's directories", () => {
    expect(plan.init.some((s) => s.kind === 'dir-fd')).toBe(false);
    expect(plan.init.slice(-2)).toEqual([
      { kind: 'dev-bind', src: '/dev/null', dest: '/dev/null' },
      { kind: 'remount-ro', dest: '/' },
    ]);
    expect(() => mountArgs(plan.init)).not.toThrow();
  });

  it('follows the merged-usr links as the host has them', () => {
    for (const top of ['/bin', '/sbin', '/lib']) {
      const link = lstatSync(top).isSymbolicLink();
      expect(plan.instance).toContainEqual(
        link
          ? { kind: 'symlink', target: readlinkSync(top), at: top }
          : { kind: 'ro-bind', src: top, dest: top },
      );
    }
  });

  it('cannot be changed once built', () => {
    expect(Object.isFrozen(plan.tools)).toBe(true);
    expect(Object.isFrozen(plan.instance)).toBe(true);
    expect(() => (plan.instance as MountStep[]).push({ kind: 'dir', dest: '/x' })).toThrow();
  });
});
