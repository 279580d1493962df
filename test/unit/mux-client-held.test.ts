/**
 * What the relay holds for one client while a navigation of its is checked
 * (chromium/mux-client.ts): its later messages on that session wait in order, the first one is
 * not counted (a frame the relay has already read), after it at most `CDP_MAX_QUEUED_BYTES` wait,
 * and the bytes let go when the messages run count no more, so a client can neither grow the
 * server past the bound nor be dropped for messages that already went.
 */
import { describe, expect, it } from 'vitest';
import { CDP_MAX_QUEUED_BYTES as Q } from '../../src/api/cdp-limits.js';
import { ClientState } from '../../src/server/chromium/mux-client.js';

/** One allocation, viewed at any length up to Q + 1 (holding copies nothing). */
const bytes = Buffer.allocUnsafe(Q + 1);
const sized = (n: number) => bytes.subarray(0, n);

function holdingClient() {
  const c = new ClientState('S', 'T');
  c.startHolding('S');
  return c;
}

describe('messages held on a session', () => {
  it('the first is not counted, whatever its size; after it, exactly the bound', () => {
    const c = holdingClient();
    expect(c.hold('S', sized(Q + 1))).toBe(true);
    expect(c.hold('S', sized(Q))).toBe(true);
    expect(c.hold('S', sized(1))).toBe(false);
  });

  it('run in order when released, and count no more', () => {
    const c = holdingClient();
    const first = sized(Q + 1);
    const second = sized(Q);
    c.hold('S', first);
    c.hold('S', second);
    const ran: Buffer[] = [];
    c.release('S', (d) => ran.push(d));
    expect(ran).toHaveLength(2);
    expect(ran[0]).toBe(first);
    expect(ran[1]).toBe(second);
    expect(c.holding('S')).toBe(false);
    // the next navigation's wait starts from nothing
    c.startHolding('S');
    expect(c.hold('S', sized(Q + 1))).toBe(true);
    expect(c.hold('S', sized(Q))).toBe(true);
    expect(c.hold('S', sized(1))).toBe(false);
  });

  it('run once: a second release, or one of a session never held, runs nothing', () => {
    const c = holdingClient();
    c.hold('S', Buffer.from('{"id":1}'));
    const ran: string[] = [];
    c.release('S', (d) => ran.push(d.toString()));
    c.release('S', (d) => ran.push(d.toString()));
    c.release('OTHER', (d) => ran.push(d.toString()));
    expect(ran).toEqual(['{"id":1}']);
  });

  it('a client dropped by one of them runs none of the rest', () => {
    const c = holdingClient();
    for (const id of [1, 2, 3]) c.hold('S', Buffer.from(`{"id":${id}}`));
    const ran: string[] = [];
    expect(() =>
      c.release('S', (d) => {
        ran.push(d.toString());
        c.close();
      }),
    ).not.toThrow();
    expect(ran).toEqual(['{"id":1}']);
  });
});
