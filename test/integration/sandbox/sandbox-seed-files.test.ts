/**
 * `Sandbox.seedFiles` (src/server/sandbox/sandbox.ts), what a start from a saved browser profile
 * writes onto the instance's fresh disk, on a real sandbox: a tree of a few hundred files in
 * nested directories (listed as a saved profile lists them, and also with no directory entries
 * at all) arrives whole, each file with its bytes, owned by the instance's user, files 0600 and
 * directories 0700, as the instance itself sees them; a bad path or a file that exists already
 * fails the seed.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SANDBOX_PATH, type Sandbox } from '../../../src/server/sandbox/index.js';
import { testSandboxes } from '../../helpers/sandbox.js';

const { sandbox } = testSandboxes('seed');

/** `find` inside the instance: `<type> <owner> <mode> <size> <sha256> <path>` per entry, sorted. */
async function inside(box: Sandbox, dir: string): Promise<string[]> {
  const script =
    `cd "$1" && find . -mindepth 1 -printf '%y %u %m %s %p\\n' | sort | ` +
    `while read -r t u m s p; do h=-; [ "$t" = f ] && h=$(sha256sum "$p" | cut -c1-16); ` +
    `echo "$t $u $m $s $h $p"; done`;
  const r = await box.exec(['sh', '-c', script, 'sh', `${box.home}/${dir}`], {
    env: { PATH: SANDBOX_PATH, HOME: box.home },
    timeoutMs: 30_000,
  });
  expect(r.code, r.stderr.toString()).toBe(0);
  return r.stdout.toString().trim().split('\n');
}

/** 300 files of varied sizes in three levels of directories, as `readTree` lists a profile. */
function tree(withDirs: boolean): { path: string; data?: Buffer }[] {
  const out: { path: string; data?: Buffer }[] = [];
  for (let a = 0; a < 5; a++) {
    if (withDirs) out.push({ path: `d${a}` });
    for (let b = 0; b < 6; b++) {
      if (withDirs) out.push({ path: `d${a}/e${b}` });
      for (let c = 0; c < 10; c++) {
        const n = a * 60 + b * 10 + c;
        out.push({ path: `d${a}/e${b}/f${c}`, data: Buffer.alloc(n * 37 + 1, `${n}:`) });
      }
    }
  }
  out.push({ path: 'top', data: Buffer.from('top') });
  if (withDirs) out.push({ path: 'empty' });
  return out;
}

describe('seedFiles', () => {
  it('writes every file of a large tree whole, as the instance user, 0600 in 0700 directories', async () => {
    for (const withDirs of [true, false]) {
      const box = await sandbox();
      const entries = tree(withDirs);
      await box.seedFiles('seeded/profile', entries);
      const seen = await inside(box, 'seeded/profile');
      const files = seen.filter((l) => l.startsWith('f '));
      const dirs = seen.filter((l) => l.startsWith('d '));
      expect(files).toHaveLength(301);
      expect(dirs).toHaveLength(5 + 30 + (withDirs ? 1 : 0));
      const user = files[0]!.split(' ')[1]!;
      expect(user).not.toBe('root');
      for (const line of dirs) expect(line.split(' ').slice(1, 3)).toEqual([user, '700']);
      const expected = new Map(
        entries
          .filter((e) => e.data)
          .map((e) => [
            `./${e.path}`,
            [e.data!.length, createHash('sha256').update(e.data!).digest('hex').slice(0, 16)],
          ]),
      );
      for (const line of files) {
        const [, owner, mode, size, hash, path] = line.split(' ');
        expect([owner, mode]).toEqual([user, '600']);
        expect([Number(size), hash]).toEqual(expected.get(path!));
      }
    }
  });

  it('a bad path or a file that is there already fails the seed', async () => {
    const box = await sandbox();
    await expect(box.seedFiles('p', [{ path: 'a/../b', data: Buffer.from('x') }])).rejects.toThrow(
      /bad path/,
    );
    await expect(box.seedFiles('p', [{ path: '/etc/x', data: Buffer.from('x') }])).rejects.toThrow(
      /bad path/,
    );
    await box.seedFiles('p', [{ path: 'one', data: Buffer.from('1') }]);
    await expect(
      box.seedFiles(
        'p',
        Array.from({ length: 40 }, (_, i) => ({
          path: i === 20 ? 'one' : `n${i}`,
          data: Buffer.from('2'),
        })),
      ),
    ).rejects.toThrow(/EEXIST/);
    expect((await inside(box, 'p')).find((l) => l.endsWith(' ./one'))).toMatch(/^f \S+ 600 1 /);
  });
});
