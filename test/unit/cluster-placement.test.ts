/**
 * Placement's choice (warm claim first, else the least loaded of K sampled nodes among those up,
 * leased and with room; the cluster-wide cap) and the Retry-After of a full cluster
 * (src/server/cluster/placement.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  choose,
  clusterLive,
  retryAfterSeconds,
  RETRY_AFTER_MAX_SECONDS,
  RETRY_AFTER_MIN_SECONDS,
  type NodeLoad,
} from '../../src/server/cluster/placement.js';

const node = (
  name: string,
  live: number,
  capacity = 4,
  more: Partial<NodeLoad> = {},
): NodeLoad => ({
  name,
  url: `http://${name}`,
  capacity,
  freeSlots: capacity - live,
  warm: {},
  state: 'up',
  leased: true,
  ...more,
});

/** A `random` that returns each of `values` in turn. */
const sequence = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length]!;
};

describe('choose', () => {
  it('takes the less loaded of the sampled nodes, and this node on a tie', () => {
    const nodes = [node('a', 3), node('b', 1), node('c', 2)];
    expect(choose(nodes, { type: 'browser', warmEligible: true, self: 'a', k: 3 })?.node.name).toBe(
      'b',
    );
    const tied = [node('a', 1), node('b', 1)];
    expect(choose(tied, { type: 'browser', warmEligible: true, self: 'b', k: 2 })?.node.name).toBe(
      'b',
    );
    expect(choose(tied, { type: 'browser', warmEligible: true, self: 'a', k: 2 })?.node.name).toBe(
      'a',
    );
  });

  it('compares load as live / capacity, not live alone', () => {
    // 2 of 8 is less loaded than 1 of 2
    const nodes = [node('small', 1, 2), node('big', 2, 8)];
    expect(choose(nodes, { type: 'ubuntu', warmEligible: false, self: 'x', k: 2 })?.node.name).toBe(
      'big',
    );
  });

  it('samples only K nodes: the least loaded of the sample, not of all', () => {
    const nodes = [node('a', 3), node('b', 2), node('c', 0)];
    // the sample is a (index 0 of 3), then b (index 0 of the 2 left): c is never looked at
    const r = choose(nodes, {
      type: 'ubuntu',
      warmEligible: false,
      self: 'x',
      k: 2,
      random: sequence(0, 0),
    });
    expect(r?.node.name).toBe('b');
    // over many placements, every node with room is chosen sometimes, the least loaded most
    const counts = new Map<string, number>();
    for (let i = 0; i < 600; i++) {
      const n = choose(nodes, { type: 'ubuntu', warmEligible: false, self: 'x', k: 2 })!.node.name;
      counts.set(n, (counts.get(n) ?? 0) + 1);
    }
    expect(counts.get('a') ?? 0).toBe(0); // the most loaded loses every pair it is in
    expect(counts.get('c')!).toBeGreaterThan(counts.get('b')!);
  });

  it('never chooses a node that is draining, unleased, left, full or excluded', () => {
    const nodes = [
      node('draining', 0, 4, { state: 'draining' }),
      node('unleased', 0, 4, { leased: false }),
      node('left', 0, 4, { state: 'left' }),
      node('full', 4, 4),
      node('excluded', 0, 4),
      node('busy', 3, 4),
    ];
    for (let i = 0; i < 50; i++) {
      const r = choose(nodes, {
        type: 'browser',
        warmEligible: true,
        self: 'x',
        k: 3,
        exclude: new Set(['excluded']),
      });
      expect(r?.node.name).toBe('busy');
    }
    expect(
      choose(nodes.slice(0, 5), {
        type: 'browser',
        warmEligible: true,
        self: 'x',
        exclude: new Set(['excluded']),
      }),
    ).toBeUndefined();
  });

  it('claims a warm instance first, this node’s own before another’s', () => {
    const nodes = [
      node('a', 0),
      node('b', 3, 4, { warm: { browser: 1 } }),
      node('c', 3, 4, { warm: { browser: 2, ubuntu: 1 } }),
    ];
    const b = choose(nodes, { type: 'browser', warmEligible: true, self: 'b' });
    expect(b).toMatchObject({ node: { name: 'b' }, warm: true });
    const fromA = choose(nodes, { type: 'ubuntu', warmEligible: true, self: 'a' });
    expect(fromA).toMatchObject({ node: { name: 'c' }, warm: true });
    // a start the pool cannot serve (extensions, a profile, an identity) goes by load
    const cold = choose(nodes, { type: 'browser', warmEligible: false, self: 'b', k: 3 });
    expect(cold).toMatchObject({ node: { name: 'a' }, warm: false });
    // a warm node that is draining or full does not count
    const off = [node('a', 0), node('b', 0, 4, { warm: { browser: 1 }, state: 'draining' })];
    expect(choose(off, { type: 'browser', warmEligible: true, self: 'a' })?.warm).toBe(false);
  });

  it('refuses at the cluster-wide cap, counting every leased node’s live instances', () => {
    const nodes = [
      node('a', 2),
      node('b', 1, 4, { state: 'draining' }),
      node('gone', 4, 4, { leased: false }),
    ];
    expect(clusterLive(nodes)).toBe(3);
    expect(choose(nodes, { type: 'ubuntu', warmEligible: false, self: 'a', clusterMax: 3 })).toBe(
      undefined,
    );
    expect(
      choose(nodes, { type: 'ubuntu', warmEligible: false, self: 'a', clusterMax: 4 })?.node.name,
    ).toBe('a');
  });
});

describe('retryAfterSeconds', () => {
  const load = (over: Partial<Parameters<typeof retryAfterSeconds>[0]>) => ({
    needed: 1,
    secondsToDeadline: [],
    recentEnds: 0,
    windowSeconds: 600,
    ...over,
  });

  it('is the needed-th soonest deadline', () => {
    expect(retryAfterSeconds(load({ secondsToDeadline: [90, 30, 3000] }))).toBe(30);
    expect(retryAfterSeconds(load({ needed: 2, secondsToDeadline: [90, 30, 3000] }))).toBe(90);
    expect(retryAfterSeconds(load({ secondsToDeadline: [12.2] }))).toBe(13); // whole seconds, up
  });

  it('is the time `needed` ends take at the recent rate, when that is sooner', () => {
    // 20 ends in 600 s: one every 30 s
    expect(retryAfterSeconds(load({ secondsToDeadline: [3000], recentEnds: 20 }))).toBe(30);
    expect(retryAfterSeconds(load({ needed: 3, secondsToDeadline: [3000], recentEnds: 20 }))).toBe(
      90,
    );
    expect(retryAfterSeconds(load({ secondsToDeadline: [10], recentEnds: 20 }))).toBe(10);
  });

  it('grows with the load', () => {
    const light = retryAfterSeconds(load({ secondsToDeadline: [20, 200], recentEnds: 10 }));
    const heavier = retryAfterSeconds(load({ secondsToDeadline: [120, 200], recentEnds: 10 }));
    const fewerEnds = retryAfterSeconds(load({ secondsToDeadline: [120, 200], recentEnds: 6 }));
    expect(light).toBeLessThan(heavier);
    expect(heavier).toBeLessThan(fewerEnds);
  });

  it('stays within its bounds', () => {
    expect(retryAfterSeconds(load({}))).toBe(RETRY_AFTER_MAX_SECONDS); // nothing to go by
    expect(retryAfterSeconds(load({ secondsToDeadline: [86_400] }))).toBe(RETRY_AFTER_MAX_SECONDS);
    expect(retryAfterSeconds(load({ secondsToDeadline: [0] }))).toBe(RETRY_AFTER_MIN_SECONDS);
    expect(retryAfterSeconds(load({ recentEnds: 1_000_000 }))).toBe(RETRY_AFTER_MIN_SECONDS);
    // more needed than deadlines known: the rate alone, else the bound
    expect(retryAfterSeconds(load({ needed: 3, secondsToDeadline: [5] }))).toBe(
      RETRY_AFTER_MAX_SECONDS,
    );
  });
});
