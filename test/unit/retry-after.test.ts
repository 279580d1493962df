/**
 * A single node's Retry-After at its own cap (src/server/instances/retry-after.ts): what the
 * shared formula is given (instances to wait for, seconds to each deadline, recent ends and
 * their window), and the ends counted in a sliding window; and placement's view of a draining
 * node (src/server/http/start-placement.ts: its own drain counts before the database says so).
 */
import { describe, expect, it } from 'vitest';
import {
  END_WINDOW_SECONDS,
  nodeLoad,
  RecentEnds,
  retryAfterSeconds,
} from '../../src/server/instances/retry-after.js';
import type { NodeLoad } from '../../src/server/cluster/placement.js';
import { StartPlacement } from '../../src/server/http/start-placement.js';

describe('RecentEnds', () => {
  it('counts the ends within its window before now, and forgets older ones', () => {
    const ends = new RecentEnds(60);
    expect(ends.windowSeconds).toBe(60);
    expect(ends.count(1_000_000)).toBe(0);
    ends.record(1_000_000);
    ends.record(1_010_000);
    ends.record(1_050_000);
    expect(ends.count(1_050_000)).toBe(3);
    expect(ends.count(1_060_000)).toBe(2); // the first is 60 s old: out
    expect(ends.count(1_109_999)).toBe(1);
    expect(ends.count(1_110_000)).toBe(0);
  });

  it('looks back ten minutes by default, as the cluster reads its rows', () => {
    expect(new RecentEnds().windowSeconds).toBe(END_WINDOW_SECONDS);
    expect(END_WINDOW_SECONDS).toBe(600);
  });
});

describe('nodeLoad', () => {
  const now = 5_000_000;
  const none = new RecentEnds();

  it('needs one instance to end at the cap, more past it (a cap lowered by a restart)', () => {
    expect(nodeLoad(4, 4, [], none, now).needed).toBe(1);
    expect(nodeLoad(6, 4, [], none, now).needed).toBe(3);
  });

  it('gives the seconds to each deadline, none below zero', () => {
    const load = nodeLoad(3, 3, [now + 36_000, now + 120_500, now - 2_000], none, now);
    expect(load.secondsToDeadline).toEqual([36, 120.5, 0]);
    expect(retryAfterSeconds(load)).toBe(1); // one is past its deadline: ending now
    expect(retryAfterSeconds(nodeLoad(2, 2, [now + 36_000, now + 120_500], none, now))).toBe(36);
  });

  it('gives the ends of its window, which shorten a wait for long deadlines', () => {
    const ends = new RecentEnds();
    for (let i = 0; i < 20; i++) ends.record(now - i * 1000);
    const load = nodeLoad(2, 2, [now + 3_600_000, now + 3_600_000], ends, now);
    expect(load).toMatchObject({ recentEnds: 20, windowSeconds: 600 });
    expect(retryAfterSeconds(load)).toBe(30); // 20 ends in 600 s: one every 30 s
    expect(retryAfterSeconds(nodeLoad(2, 2, [now + 3_600_000], none, now))).toBe(300);
  });
});

describe('StartPlacement.nodes', () => {
  const row = (name: string, state: NodeLoad['state']): NodeLoad => ({
    name,
    url: `http://${name}`,
    capacity: 4,
    freeSlots: 4,
    warm: {},
    state,
    leased: true,
  });
  const placement = (draining: boolean, mine: NodeLoad['state']) =>
    new StartPlacement({
      name: 'self',
      db: { query: () => Promise.reject(new Error('not asked')) },
      view: { nodes: () => [row('self', mine), row('other', 'up')], close: () => {} },
      local: () => ({ capacity: 2, freeSlots: 1, warm: { browser: 1 } }),
      draining: () => draining,
    });

  it('makes this node’s row of its own numbers and its own drain, before the database’s row', async () => {
    const p = placement(true, 'up');
    const [self, other] = p.nodes();
    expect(self).toMatchObject({ name: 'self', state: 'draining', capacity: 2, freeSlots: 1 });
    expect(other).toMatchObject({ name: 'other', state: 'up' });
    await p.close();
  });

  it('reads the database’s state while this node is not draining', async () => {
    const up = placement(false, 'up');
    expect(up.nodes()[0]!.state).toBe('up');
    const marked = placement(false, 'draining');
    expect(marked.nodes()[0]!.state).toBe('draining');
    await up.close();
    await marked.close();
  });
});
