/**
 * The subordinate range `doctor` suggests touches no other user's range, account or group, and a
 * server's range that does is found out, each on synthetic /etc/subuid, /etc/subgid, /etc/passwd
 * and /etc/group (subid-ranges.ts). That doctor and the server say so on this machine is
 * test/integration/sandbox/unprivileged.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  freeRange,
  parseRanges,
  rangeConflicts,
  spanOf,
  type IdFiles,
} from '../../src/server/sandbox/subid-ranges.js';

const PASSWD = [
  'root:x:0:0:root:/root:/bin/bash',
  'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
  'alice:x:1000:1000::/home/alice:/bin/bash',
  'burrow:x:1001:1001::/home/burrow:/bin/bash',
].join('\n');
const GROUP = ['root:x:0:', 'nogroup:x:65534:', 'alice:x:1000:', 'burrow:x:1001:'].join('\n');

const files = (subuid: string, subgid = subuid, extra: Partial<IdFiles> = {}): IdFiles => ({
  subuid,
  subgid,
  passwd: PASSWD,
  group: GROUP,
  ...extra,
});

describe('freeRange', () => {
  it("suggests useradd's first range when nothing holds it", () => {
    expect(freeRange(files(''))).toEqual({ start: 100_000, count: 65_536 });
    expect(spanOf(freeRange(files(''))!)).toBe('100000-165535');
  });

  it("never one overlapping any user's line of either file", () => {
    // alice holds the first range (the old suggestion), bob a stretch of gids only
    const f = files('alice:100000:65536\n', 'alice:100000:65536\nbob:170000:10\n');
    const r = freeRange(f)!;
    expect(r).toEqual({ start: 170_010, count: 65_536 });
    for (const line of parseRanges(`${f.subuid}\n${f.subgid}`)) {
      expect(r.start >= line.start + line.count || r.start + r.count <= line.start).toBe(true);
    }
  });

  it("never one holding an account's uid or a group's gid, and always above 65535", () => {
    const f = files('', '', {
      passwd: `${PASSWD}\nldap:x:120000:120000::/:/bin/false`,
      group: `${GROUP}\nbig:x:150000:`,
    });
    const r = freeRange(f)!;
    expect(r.start).toBe(150_001);
    expect(r.start).toBeGreaterThan(65_535);
  });

  it("skips systemd's container range and burrow's root range, and says when nothing is left", () => {
    // everything from 100000 to systemd's range is held
    const f = files('crowd:100000:424288\n');
    expect(freeRange(f)).toEqual({ start: 1_879_048_192, count: 65_536 });
    const full = files(`crowd:100000:424288\nrest:1879048192:${4_294_967_295 - 1_879_048_192}\n`);
    expect(freeRange(full)).toBeUndefined();
  });

  it('reads a file with comments, blank and malformed lines', () => {
    expect(
      parseRanges('# c\n\nalice:100000:65536\nbad:x:1\nzero:5:0\nbob:300000:10:extra\n'),
    ).toEqual([{ owner: 'alice', start: 100_000, count: 65_536 }]);
  });
});

describe('rangeConflicts', () => {
  const me = { name: 'burrow', uid: 1001 };
  const mine = { uid: { start: 200_000, count: 65_536 }, gid: { start: 200_000, count: 65_536 } };

  it("is empty for a range no one else holds (the owner's own lines, by name or uid, are not a conflict)", () => {
    const f = files('alice:100000:65536\nburrow:200000:65536\n1001:200000:10\n');
    expect(rangeConflicts(me, mine, f)).toEqual([]);
  });

  it("names another user's overlapping line in either file, an account and a group inside", () => {
    const f = files(
      'burrow:200000:65536\nalice:265535:10\n',
      'burrow:200000:65536\nbob:150000:60000\n',
      {
        passwd: `${PASSWD}\nsvc:x:230000:230000::/:/bin/false`,
        group: `${GROUP}\nteam:x:210000:`,
      },
    );
    expect(rangeConflicts(me, mine, f)).toEqual([
      "alice's range 265535:10 in /etc/subuid",
      "bob's range 150000:60000 in /etc/subgid",
      'the account svc (uid 230000)',
      'the group team (gid 210000)',
    ]);
  });

  it("a range ending where another's begins does not overlap it", () => {
    const f = files('alice:265536:65536\nbob:134464:65536\n');
    expect(rangeConflicts(me, mine, f)).toEqual([]);
  });

  it("the image's range against a host user's (200000:65536 inside a host's 165536:131072)", () => {
    const f = files('host-user:165536:131072\n');
    expect(rangeConflicts(me, mine, f)).toEqual([
      "host-user's range 165536:131072 in /etc/subuid",
      "host-user's range 165536:131072 in /etc/subgid",
    ]);
  });
});
