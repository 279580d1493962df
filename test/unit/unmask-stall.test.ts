/**
 * A connection that holds part of the server's total of long frames must send on
 * (src/server/chromium/unmask.ts, `ASSEMBLING_STALL_MS`, `ASSEMBLING_MIN_PROGRESS`): one that sends
 * less than the minimum in a window while it is read is closed (1008, with the reason) and then
 * cut, and what it held is given back when its socket closes; one that sends on, however slowly
 * above the minimum, is not; nor is one the relay or `ws` stopped reading. Once others wait for
 * the total, a frame held then must be finished within a window, whatever the minimum says.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ASSEMBLING_MIN_PROGRESS,
  ASSEMBLING_STALL_MS,
  HOLDING_CLOSE,
  STALLED_CLOSE,
  assemblingBytes,
  unmaskAsReceived,
} from '../../src/server/chromium/unmask.js';

const MiB = 1024 * 1024;
const LENGTH = 8 * MiB;

/** A masked binary frame (FIN) of `payload`, a 64-bit length, its key zero. */
function frame(payload: Buffer): Buffer {
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(payload.length));
  return Buffer.concat([Buffer.from([0x82, 0x80 | 127]), len, Buffer.alloc(4), payload]);
}

function connection() {
  const socket = new EventEmitter();
  const closes: [number, string][] = [];
  let paused = false;
  let terminated = 0;
  const ws = {
    _receiver: { write: (_chunk: Buffer) => true, writableNeedDrain: false },
    _socket: {
      once: (event: 'close', listener: () => void) => socket.once(event, listener),
      resume: () => {},
      isPaused: () => paused,
    },
    isPaused: false,
    close: (code: number, reason: string) => closes.push([code, reason]),
    terminate: () => {
      terminated++;
      socket.emit('close');
    },
  };
  unmaskAsReceived(ws, 256 * MiB);
  return {
    ws,
    closes,
    terminated: () => terminated,
    pauseSocket: (p: boolean) => (paused = p),
    read: (chunk: Buffer) => ws._receiver.write(chunk),
    gone: () => socket.emit('close'),
  };
}

const open: ReturnType<typeof connection>[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.gone();
  vi.useRealTimers();
  expect(assemblingBytes()).toBe(0);
});

/** A connection that has sent the header of an 8 MiB frame: it holds 8 MiB of the total. */
function holding() {
  const c = connection();
  open.push(c);
  const wire = frame(randomBytes(LENGTH));
  const before = assemblingBytes();
  c.read(wire.subarray(0, 14));
  expect(assemblingBytes() - before).toBe(LENGTH);
  return { c, wire };
}

describe('a connection holding part of the total', () => {
  it('that sends nothing on is closed after a window, then cut; its part is given back', async () => {
    vi.useFakeTimers();
    const { c } = holding();
    await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS - 1);
    expect(c.closes).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(c.closes).toEqual([[STALLED_CLOSE.code, STALLED_CLOSE.reason]]);
    expect(STALLED_CLOSE.reason).toBe('a long message was not sent on: under 1 MiB in 20 s');
    expect(Buffer.byteLength(STALLED_CLOSE.reason)).toBeLessThanOrEqual(123);
    // its close frame goes out first, then the socket is cut
    expect(c.terminated()).toBe(0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(c.terminated()).toBe(1);
    expect(assemblingBytes()).toBe(0);
  });

  it('that sends just under the minimum in a window is closed; at the minimum it is not', async () => {
    vi.useFakeTimers();
    const under = holding();
    const at = holding();
    under.c.read(under.wire.subarray(14, 14 + ASSEMBLING_MIN_PROGRESS - 1));
    at.c.read(at.wire.subarray(14, 14 + ASSEMBLING_MIN_PROGRESS));
    await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS);
    expect(under.c.closes).toHaveLength(1);
    expect(at.c.closes).toEqual([]);
  });

  it('that sends on window after window finishes its frame, and then holds nothing', async () => {
    vi.useFakeTimers();
    const { c, wire } = holding();
    let from = 14;
    while (from < wire.length) {
      const to = Math.min(wire.length, from + ASSEMBLING_MIN_PROGRESS);
      c.read(wire.subarray(from, to));
      from = to;
      await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS);
      expect(c.closes).toEqual([]);
    }
    expect(assemblingBytes()).toBe(0);
    // holding nothing, it may be idle as long as it likes
    await vi.advanceTimersByTimeAsync(5 * ASSEMBLING_STALL_MS);
    expect(c.closes).toEqual([]);
  });

  it('is not closed while it is not read: the relay paused it, or ws stopped reading', async () => {
    vi.useFakeTimers();
    const relay = holding();
    const full = holding();
    relay.c.ws.isPaused = true;
    full.c.pauseSocket(true);
    await vi.advanceTimersByTimeAsync(3 * ASSEMBLING_STALL_MS);
    expect(relay.c.closes).toEqual([]);
    expect(full.c.closes).toEqual([]);
    // read again and still silent: closed after the next window
    relay.c.ws.isPaused = false;
    full.c.pauseSocket(false);
    await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS);
    expect(relay.c.closes).toHaveLength(1);
    expect(full.c.closes).toHaveLength(1);
  });
});

/** The first 14 bytes of a masked binary frame of `length` bytes (its key zero). */
function header(length: number): Buffer {
  return frame(Buffer.alloc(0))
    .fill(0, 2)
    .subarray(0, 14)
    .map((b, i) => {
      if (i < 2 || i >= 10) return b;
      return Number((BigInt(length) >> BigInt(8 * (9 - i))) & 0xffn);
    }) as Buffer;
}

describe('a connection holding part of the total while others wait', () => {
  it('finishes its frame within a window of their waiting, or is closed and its part goes to them', async () => {
    vi.useFakeTimers();
    const fillers = [connection(), connection()];
    const [quick, waiter] = [connection(), connection()];
    open.push(...fillers, quick, waiter);
    for (const f of fillers) f.read(header(200 * MiB));
    quick.read(header(8 * MiB));
    waiter.read(header(200 * MiB)); // 200 + 200 + 8 + 200 MiB > the total: it waits
    expect(assemblingBytes()).toBe(408 * MiB);
    // a window in which all send the minimum: enough, and now others wait
    for (const c of [...fillers, quick]) c.read(Buffer.alloc(ASSEMBLING_MIN_PROGRESS));
    await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS);
    for (const c of [...fillers, quick]) expect(c.closes).toEqual([]);
    // the next: the quick one finishes its frame, the fillers send the minimum again
    quick.read(Buffer.alloc(8 * MiB - ASSEMBLING_MIN_PROGRESS));
    for (const f of fillers) f.read(Buffer.alloc(ASSEMBLING_MIN_PROGRESS));
    expect(assemblingBytes()).toBe(400 * MiB); // the waiter still does not fit
    await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS);
    expect(quick.closes).toEqual([]);
    for (const f of fillers) expect(f.closes).toEqual([[HOLDING_CLOSE.code, HOLDING_CLOSE.reason]]);
    expect(HOLDING_CLOSE.reason).toBe(
      "others waited for the total while this client's long message was not finished in 20 s",
    );
    expect(Buffer.byteLength(HOLDING_CLOSE.reason)).toBeLessThanOrEqual(123);
    await vi.advanceTimersByTimeAsync(1000);
    for (const f of fillers) expect(f.terminated()).toBe(1);
    // the waiting frame got their part
    expect(assemblingBytes()).toBe(200 * MiB);
    expect(waiter.closes).toEqual([]);
  });

  it('is held to the minimum alone again once nobody waits', async () => {
    vi.useFakeTimers();
    const holders = [connection(), connection()];
    const waiter = connection();
    open.push(...holders, waiter);
    for (const h of holders) h.read(header(200 * MiB));
    waiter.read(header(200 * MiB));
    expect(assemblingBytes()).toBe(400 * MiB); // the waiter waits
    for (const h of holders) h.read(Buffer.alloc(ASSEMBLING_MIN_PROGRESS));
    await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS); // others wait: each frame marked
    waiter.gone(); // the waiter leaves
    for (let i = 0; i < 3; i++) {
      for (const h of holders) h.read(Buffer.alloc(ASSEMBLING_MIN_PROGRESS));
      await vi.advanceTimersByTimeAsync(ASSEMBLING_STALL_MS);
    }
    for (const h of holders) expect(h.closes).toEqual([]);
    expect(assemblingBytes()).toBe(400 * MiB);
  });
});
