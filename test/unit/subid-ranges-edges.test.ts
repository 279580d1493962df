/**
 * The edges of reading the id files and of choosing a free range (subid-ranges.ts): lines as
 * editors and tools write them (indented, commented out, half-filled), ids exactly at a range's
 * ends, candidates found out of order, and a range that ends on the last usable id.
 */
import { describe, expect, it } from 'vitest';
import {
  accountIds,
  freeRange,
  parseRanges,
  rangeConflicts,
  type IdFiles,
} from '../../src/server/sandbox/subid-ranges.js';

const files = (over: Partial<IdFiles>): IdFiles => ({
  subuid: '',
  subgid: '',
  passwd: '',
  group: '',
  ...over,
});
/** The last id a range may hold (2^32 - 2: 2^32 - 1 is "no id"). */
const LAST = 4_294_967_294;

describe('lines of the id files', () => {
  it('an indented line is read; a commented-out or ownerless one is not', () => {
    expect(parseRanges('  alice:100000:65536\t\n#bob:300000:10\n:400000:10\n')).toEqual([
      { owner: 'alice', start: 100_000, count: 65_536 },
    ]);
    expect(
      accountIds('  svc:x:230000:230000::/:/bin/false\n#old:x:240000:1::/:\n:x:5:5::/:\n'),
    ).toEqual([{ name: 'svc', id: 230_000 }]);
  });

  it('an account line without a numeric id is skipped, whatever part of it is not a number', () => {
    expect(accountIds('a:x:12a:1\nb:x:a12:1\nc:x::1\nd\ne:x:7:7')).toEqual([{ name: 'e', id: 7 }]);
  });

  it("the owner's own line, indented, is still its own", () => {
    const mine = { uid: { start: 200_000, count: 10 }, gid: { start: 200_000, count: 10 } };
    const f = files({ subuid: '  burrow:200000:10\n', subgid: 'burrow:200000:10' });
    expect(rangeConflicts({ name: 'burrow', uid: 1001 }, mine, f)).toEqual([]);
  });
});

describe('ids at the ends of a range', () => {
  const mine = { uid: { start: 200_000, count: 10 }, gid: { start: 300_000, count: 10 } };
  const me = { name: 'burrow', uid: 1001 };

  it('the first id of a range is inside it, the one just past its end is not', () => {
    const f = files({
      passwd:
        'first:x:200000:1::/:\nlast:x:200009:1::/:\npast:x:200010:1::/:\nbefore:x:199999:1::/:',
      group: 'g0:x:300000:\ng9:x:300009:\ng10:x:300010:\nbefore:x:299999:',
    });
    expect(rangeConflicts(me, mine, f)).toEqual([
      'the account first (uid 200000)',
      'the account last (uid 200009)',
      'the group g0 (gid 300000)',
      'the group g9 (gid 300009)',
    ]);
  });
});

describe('the free range', () => {
  it("an account's uid alone moves it", () => {
    expect(freeRange(files({ passwd: 'ldap:x:120000:1::/:' }), 10)).toEqual({
      start: 100_000,
      count: 10,
    });
    expect(freeRange(files({ passwd: 'ldap:x:100005:1::/:' }), 10)).toEqual({
      start: 100_006,
      count: 10,
    });
  });

  it('is the lowest free one, however the lines that free it are ordered', () => {
    const f = files({ subuid: 'bob:300000:10\nalice:100000:65536\n' });
    expect(freeRange(f)).toEqual({ start: 165_536, count: 65_536 });
  });

  it('may end on the last usable id, not past it', () => {
    // everything from 100000 up is held but the last 65536 ids
    const held = `crowd:100000:${LAST - 65_536 + 1 - 100_000}\n`;
    expect(freeRange(files({ subuid: held }))).toEqual({ start: LAST - 65_535, count: 65_536 });
    // one more held id, and no range of 65536 is left
    const more = `crowd:100000:${LAST - 65_536 + 2 - 100_000}\n`;
    expect(freeRange(files({ subuid: more }))).toBeUndefined();
  });
});
