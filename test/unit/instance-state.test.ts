/**
 * The life cycle of an instance (src/server/instances/state.ts): every move the contract allows
 * is made, every other one is refused and changes nothing, and the end reason is written once, by
 * the move that ended the instance. The expected moves are written out here, from COMPAT.md's
 * "Instance lifecycle", not read from the table under test.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { INSTANCE_STATUSES, type InstanceStatus } from '../../src/api/index.js';
import { Lifecycle, transition } from '../../src/server/instances/state.js';

const ALLOWED = new Set([
  'warm_pool → deploying', // a start claims a pooled instance
  'warm_pool → terminated', // the pool gives it up
  'warm_pool → error', // it died in the pool
  'deploying → running',
  'deploying → terminated', // stopped while it starts
  'deploying → error', // it failed to start
  'running → paused',
  'running → terminated',
  'running → error', // its processes died
  'paused → running',
  'paused → terminated',
  'paused → error',
  'error → terminated', // a stop acknowledges it
]);

const ALL = INSTANCE_STATUSES as readonly InstanceStatus[];

describe('the instance life cycle', () => {
  it('knows six statuses', () => {
    expect([...ALL].sort()).toEqual(
      ['deploying', 'error', 'paused', 'running', 'terminated', 'warm_pool'].sort(),
    );
  });

  for (const from of ALL) {
    for (const to of ALL) {
      const edge = `${from} → ${to}`;
      if (ALLOWED.has(edge)) {
        it(`moves ${edge}`, () => {
          const life = new Lifecycle(from);
          expect(transition(life, to, 'expired')).toBe(true);
          expect(life.status).toBe(to);
          const ends = to === 'terminated' || to === 'error';
          expect(life.endReason).toBe(ends ? 'expired' : undefined);
          expect(life.live).toBe(['deploying', 'running', 'paused'].includes(to));
        });
      } else {
        it(`refuses ${edge}`, () => {
          const life = new Lifecycle(from, from === 'terminated' ? 'stopped' : undefined);
          expect(transition(life, to, 'crashed')).toBe(false);
          expect(life.status).toBe(from);
          expect(life.endReason).toBe(from === 'terminated' ? 'stopped' : undefined);
        });
      }
    }
  }

  it('keeps the first end reason: a crash stopped later stays crashed', () => {
    const life = new Lifecycle('running');
    expect(transition(life, 'error', 'crashed')).toBe(true);
    expect(transition(life, 'terminated', 'stopped')).toBe(true);
    expect(life).toMatchObject({ status: 'terminated', endReason: 'crashed' });
  });

  it('lets exactly one of two racing moves win', () => {
    // a stop and a crash arrive while the instance deploys; the start then finds it ended
    const life = new Lifecycle('deploying');
    const results = [
      transition(life, 'terminated', 'stopped'),
      transition(life, 'error', 'crashed'),
      transition(life, 'running'),
    ];
    expect(results).toEqual([true, false, false]);
    expect(life).toMatchObject({ status: 'terminated', endReason: 'stopped' });
  });

  it('is moved by the registry alone (its listing): no other server module calls transition', () => {
    const root = join(import.meta.dirname, '../../src/server');
    const walk = (dir: string): string[] =>
      readdirSync(dir).flatMap((n) => {
        const p = join(dir, n);
        return statSync(p).isDirectory() ? walk(p) : p.endsWith('.ts') ? [p] : [];
      });
    const callers = walk(root)
      .filter((f) => /\btransition\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(root, f))
      .sort();
    expect(callers).toEqual(['instances/listing.ts', 'instances/state.ts']);
  });
});
