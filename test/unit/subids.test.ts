/**
 * How a normal user's server hands out host uids from its subordinate ranges (subids.ts): never
 * two live instances the same pair, never its own uid or one a host process runs as, a released
 * pair available again, and a range used up said so. (That the ids are mapped and the instances'
 * processes run as them is test/integration/sandbox/unprivileged.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { anchorSteps, SubordinatePool } from '../../src/server/sandbox/subids.js';

describe('SubordinatePool', () => {
  it('hands out distinct pairs at the same offset into both ranges, and takes them back', () => {
    const pool = new SubordinatePool({
      uid: { start: 3_100_000, count: 64 },
      gid: { start: 4_100_000, count: 64 },
    });
    const taken = Array.from({ length: 64 }, () => pool.take());
    expect(new Set(taken.map((p) => p.uid)).size).toBe(64);
    for (const p of taken) {
      expect(p.uid).toBeGreaterThanOrEqual(3_100_000);
      expect(p.uid).toBeLessThan(3_100_064);
      expect(p.gid - 4_100_000).toBe(p.uid - 3_100_000);
    }
    expect(() => pool.take()).toThrow(/every uid of the subordinate range 3100000:64 is in use/);
    pool.release(taken[10]!);
    expect(pool.take()).toEqual(taken[10]);
  });

  it('uses only as much of the ranges as both have', () => {
    const pool = new SubordinatePool({
      uid: { start: 3_200_000, count: 65_536 },
      gid: { start: 4_200_000, count: 2 },
    });
    const a = pool.take();
    const b = pool.take();
    expect([a.uid, b.uid].sort()).toEqual([3_200_000, 3_200_001]);
    expect(() => pool.take()).toThrow(/in use/);
  });

  it("never the server's own uid, nor one a process on the host runs as", () => {
    // this test runs as some uid, and processes of it exist: a range of that uid alone is empty
    const own = process.getuid!();
    const pool = new SubordinatePool({
      uid: { start: own, count: 1 },
      gid: { start: 4_300_000, count: 1 },
    });
    expect(() => pool.take()).toThrow(/in use/);
    // pid 1 runs as root, whoever runs the test
    const root = new SubordinatePool({
      uid: { start: 0, count: 1 },
      gid: { start: 4_300_000, count: 1 },
    });
    expect(() => root.take()).toThrow(/in use/);
  });
});

describe('anchorSteps', () => {
  it('maps the pair as the outer namespace user 1000 (the server is its root) and drops to it last', () => {
    const argv = anchorSteps(
      { unshare: '/u', sh: '/sh', perl: '/perl', setpriv: '/setpriv' },
      { uid: 2_000_123, gid: 3_000_123 },
      '/data/etc',
      4096,
    );
    expect(argv.slice(0, 5)).toEqual([
      '/u',
      '--user',
      '--map-root-user',
      '--map-users=2000123,1000,1',
      '--map-groups=3000123,1000,1',
    ]);
    expect(argv).toContain('size=4096,mode=0711,uid=1000,gid=1000,nosuid,nodev');
    expect(argv.slice(-5)).toEqual([
      '/setpriv',
      '--reuid=1000',
      '--regid=1000',
      '--clear-groups',
      '--',
    ]);
    // unsized: the kernel's default
    const unsized = anchorSteps(
      { unshare: '/u', sh: '/sh', perl: '/perl', setpriv: '/setpriv' },
      { uid: 1, gid: 1 },
      '/e',
      0,
    );
    expect(unsized).toContain('mode=0711,uid=1000,gid=1000,nosuid,nodev');
  });
});
