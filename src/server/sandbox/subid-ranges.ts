/**
 * Whose host ids a subordinate range would share. A normal user's server runs each instance as a
 * host uid out of its `/etc/subuid` range (subids.ts): that only gives the instance an identity
 * of its own if no one else on the host has the same uid. A range that overlaps another user's
 * subordinate range shares uids with that user's rootless containers (podman, buildah, another
 * burrow): a process escaped from an instance could then signal, trace or read theirs, and theirs
 * ours. One that covers an account's uid (or a group's gid) runs instances as that account.
 *
 * So the server checks its range against every line of the four files at start (and `doctor`
 * with it), and what `doctor` suggests is a range none of them touches. Pure functions of the
 * files' text: the reading is subids.ts's.
 */

/** A `start:count` line of /etc/subuid or /etc/subgid. */
export interface IdRange {
  start: number;
  count: number;
}

/** The text of the host's id files ('' for one that is missing). */
export interface IdFiles {
  subuid: string;
  subgid: string;
  passwd: string;
  group: string;
}

/** A line of /etc/subuid or /etc/subgid: its owner (a name or a uid) and its range. */
export interface OwnedRange extends IdRange {
  owner: string;
}

/** What `rangeConflicts` checks a range against: the server's user, by name and uid. */
export interface RangeOwner {
  name: string;
  uid: number;
}

/** The size of range `doctor` suggests: 65 536 ids, what useradd gives each user. */
export const SUGGESTED_COUNT = 65_536;

/** Where useradd starts handing out subordinate ranges (login.defs SUB_UID_MIN). */
const FIRST = 100_000;

/** The highest id a range may reach (`(uid_t) -1` is no id). */
const LAST = 4_294_967_294;

/**
 * Ids that belong to someone without a line in these files, never suggested: systemd's range for
 * containers' and portable homes' users (524288–1879048191, systemd's "UIDs and GIDs" document),
 * and the one a root burrow server hands its instances (2 100 000 000 + a 24-bit number, host.ts).
 */
const RESERVED: readonly OwnedRange[] = [
  { owner: 'systemd (containers, homed)', start: 524_288, count: 1_879_048_192 - 524_288 },
  { owner: "burrow's root level", start: 2_100_000_000, count: 1 << 24 },
];

const overlaps = (a: IdRange, b: IdRange) =>
  a.start < b.start + b.count && b.start < a.start + a.count;

/** The lines of a subordinate id file; malformed ones and comments are skipped. */
export function parseRanges(text: string): OwnedRange[] {
  const out: OwnedRange[] = [];
  for (const line of text.split('\n')) {
    const [owner, start, count, ...rest] = line.trim().split(':');
    if (!owner || owner.startsWith('#') || rest.length > 0) continue;
    const range = { owner, start: Number(start), count: Number(count) };
    if (Number.isSafeInteger(range.start) && Number.isSafeInteger(range.count) && range.count > 0) {
      out.push(range);
    }
  }
  return out;
}

/** The ids of /etc/passwd (uids) or /etc/group (gids): the third field of each line. */
export function accountIds(text: string): { name: string; id: number }[] {
  const out: { name: string; id: number }[] = [];
  for (const line of text.split('\n')) {
    const [name, , id] = line.trim().split(':');
    if (!name || name.startsWith('#') || id === undefined || !/^\d+$/.test(id)) continue;
    out.push({ name, id: Number(id) });
  }
  return out;
}

/**
 * Who else holds ids of the server's ranges: other owners' lines of /etc/subuid overlapping
 * `ranges.uid` (of /etc/subgid overlapping `ranges.gid`), accounts whose uid lies in `ranges.uid`,
 * groups whose gid lies in `ranges.gid`. Each as a phrase for a message; none, an empty list. The
 * owner's own lines (by name or uid) are not a conflict.
 */
export function rangeConflicts(
  owner: RangeOwner,
  ranges: { uid: IdRange; gid: IdRange },
  files: IdFiles,
): string[] {
  const mine = (o: string) => o === owner.name || o === String(owner.uid);
  const found: string[] = [];
  const others = (file: string, text: string, range: IdRange) => {
    for (const r of parseRanges(text)) {
      if (!mine(r.owner) && overlaps(r, range)) {
        found.push(`${r.owner}'s range ${r.start}:${r.count} in ${file}`);
      }
    }
  };
  others('/etc/subuid', files.subuid, ranges.uid);
  others('/etc/subgid', files.subgid, ranges.gid);
  const within = (r: IdRange, id: number) => id >= r.start && id < r.start + r.count;
  for (const a of accountIds(files.passwd)) {
    if (within(ranges.uid, a.id)) found.push(`the account ${a.name} (uid ${a.id})`);
  }
  for (const g of accountIds(files.group)) {
    if (within(ranges.gid, g.id)) found.push(`the group ${g.name} (gid ${g.id})`);
  }
  return found;
}

/**
 * The lowest range of `count` ids from 100 000 up (above every id of the 16-bit era) that no line
 * of /etc/subuid or /etc/subgid (of any user), no account's uid or group's gid and no reserved
 * range touches: one range for both files, as `usermod --add-subuids A-B --add-subgids A-B` sets
 * it. Undefined when none is left below 2^32 - 1.
 */
export function freeRange(files: IdFiles, count = SUGGESTED_COUNT): IdRange | undefined {
  const taken: IdRange[] = [
    ...parseRanges(files.subuid),
    ...parseRanges(files.subgid),
    ...accountIds(files.passwd).map((a) => ({ start: a.id, count: 1 })),
    ...accountIds(files.group).map((g) => ({ start: g.id, count: 1 })),
    ...RESERVED,
  ];
  // the lowest free start is the first id, or just past something taken
  const starts = [FIRST, ...taken.map((t) => t.start + t.count)]
    .filter((s) => s >= FIRST && s + count - 1 <= LAST)
    .sort((a, b) => a - b);
  for (const start of starts) {
    const range = { start, count };
    if (!taken.some((t) => overlaps(t, range))) return range;
  }
  return undefined;
}

/** `usermod`'s `A-B` form of a range (both ends included). */
export const spanOf = (r: IdRange): string => `${r.start}-${r.start + r.count - 1}`;
