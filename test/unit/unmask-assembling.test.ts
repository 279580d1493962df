/**
 * The server's total of long frames being assembled (src/server/chromium/unmask.ts,
 * `CDP_MAX_ASSEMBLING_BYTES_TOTAL`), as `unmaskAsReceived` feeds `ws`: a long frame that does not
 * fit beside the others' waits, its header handed on and its socket not read (`write` says false,
 * once, however many reads come meanwhile), and goes on whole once another connection gave its
 * part back, the socket read again unless the relay itself stopped reading it; after
 * `ASSEMBLING_WAIT_MS` of that its client is closed (1008) and what it still sends is dropped; a
 * socket that closes gives back what its connection held, and its waiting frame leaves the line
 * without a close. Without `ws`'s receiver there is nothing to feed: it throws.
 *
 * The holder of the total sends only the header of a frame as long as the total: the reader
 * reserves its buffer (not touched, so not resident) and the total is full.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { setImmediate as tick } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CDP_MAX_ASSEMBLING_BYTES_TOTAL as TOTAL } from '../../src/api/cdp-limits.js';
import {
  ASSEMBLING_CLOSE,
  ASSEMBLING_WAIT_MS,
  PIECE_CHARGE,
  assemblingBytes,
  unmaskAsReceived,
} from '../../src/server/chromium/unmask.js';

const MiB = 1024 * 1024;

/** The header of a masked binary frame (FIN) of `length` bytes, a 64-bit length, and its key. */
function header(length: number, key: Buffer): Buffer {
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(length));
  return Buffer.concat([Buffer.from([0x82, 0x80 | 127]), len, key]);
}

/** A masked frame carrying `payload`, its header 14 bytes. */
function frame(payload: Buffer): Buffer {
  const key = randomBytes(4);
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i]! ^= key[i & 3]!;
  return Buffer.concat([header(payload.length, key), masked]);
}

/** A connection as the relay hands it over: `ws` with its receiver and its socket. */
function connection(max = TOTAL) {
  const socket = new EventEmitter();
  const handed: Buffer[] = [];
  const closes: [number, string][] = [];
  let resumes = 0;
  const ws = {
    _receiver: {
      write: (chunk: Buffer) => (handed.push(Buffer.from(chunk)), true),
      writableNeedDrain: false,
    },
    _socket: {
      once: (event: 'close', listener: () => void) => socket.once(event, listener),
      resume: () => resumes++,
    },
    isPaused: false,
    close: (code: number, reason: string) => closes.push([code, reason]),
  };
  unmaskAsReceived(ws, max);
  return {
    ws,
    handed,
    closes,
    resumes: () => resumes,
    /** A read of the socket, as `ws` is told of it; false: stop reading. */
    read: (chunk: Buffer) => ws._receiver.write(chunk),
    /** The socket closed (the client went away, or was closed). */
    gone: () => socket.emit('close'),
  };
}

/** A connection holding the whole total: the header of a frame as long as it. */
function holder() {
  const c = connection();
  c.read(header(TOTAL, randomBytes(4)));
  expect(assemblingBytes()).toBe(TOTAL);
  return c;
}

const open: ReturnType<typeof connection>[] = [];
const track = <T extends ReturnType<typeof connection>>(c: T) => (open.push(c), c);

afterEach(() => {
  // the latest first: a frame waiting is let go before room is given back that it would take
  for (const c of open.splice(0).reverse()) c.gone();
  vi.useRealTimers();
  expect(assemblingBytes()).toBe(0);
});

describe('a long frame that finds the total full', () => {
  it('waits, its socket not read, and goes on whole once room was given back', async () => {
    const full = track(holder());
    const waits = track(connection());
    const payload = randomBytes(MiB);
    const wire = frame(payload);
    expect(waits.read(wire.subarray(0, 1000))).toBe(false);
    // its header went on (key zeroed); its payload waits
    expect(Buffer.concat(waits.handed)).toEqual(
      Buffer.concat([wire.subarray(0, 10), Buffer.alloc(4)]),
    );
    expect(waits.read(wire.subarray(1000, 5000))).toBe(false);
    expect(waits.read(wire.subarray(5000))).toBe(false);
    expect(waits.handed).toHaveLength(1);
    expect(assemblingBytes()).toBe(TOTAL);
    full.gone();
    await tick();
    expect(waits.handed).toHaveLength(2);
    expect(waits.handed[1]!.equals(payload)).toBe(true);
    expect(waits.resumes()).toBe(1);
    // handed over whole: nothing of it is held any more
    expect(assemblingBytes()).toBe(0);
    expect(waits.closes).toEqual([]);
  });

  it('its socket stays unread if the relay itself stopped reading it', async () => {
    const full = track(holder());
    const waits = track(connection());
    waits.ws.isPaused = true;
    expect(waits.read(frame(randomBytes(MiB)))).toBe(false);
    full.gone();
    await tick();
    expect(waits.handed).toHaveLength(2);
    expect(waits.resumes()).toBe(0);
  });

  it('fits exactly in what is left of the total; a byte more waits', async () => {
    const first = track(connection());
    first.read(header(TOTAL - MiB, randomBytes(4)));
    const fits = track(connection());
    const payload = randomBytes(MiB);
    expect(fits.read(frame(payload).subarray(0, 14))).toBe(true);
    expect(assemblingBytes()).toBe(TOTAL);
    fits.gone();
    expect(assemblingBytes()).toBe(TOTAL - MiB);
    const over = track(connection());
    expect(over.read(frame(randomBytes(MiB + 1)).subarray(0, 14))).toBe(false);
    expect(assemblingBytes()).toBe(TOTAL - MiB);
  });

  it('after the wait its client is closed (1008), and what it sends then is dropped', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    track(holder());
    const waits = track(connection());
    const wire = frame(randomBytes(MiB));
    expect(waits.read(wire.subarray(0, 100))).toBe(false);
    await vi.advanceTimersByTimeAsync(ASSEMBLING_WAIT_MS - 1);
    expect(waits.closes).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    await tick();
    expect(waits.closes).toEqual([
      [1008, "the server was receiving 512 MiB of other clients' long frames for 60 s"],
    ]);
    // a WebSocket close frame carries at most 123 bytes of reason
    expect(Buffer.byteLength(ASSEMBLING_CLOSE.reason)).toBeLessThanOrEqual(123);
    const handed = waits.handed.length;
    expect(waits.read(wire.subarray(100))).toBe(true);
    expect(waits.handed).toHaveLength(handed);
    // its socket closes, as its close follows: nothing more is closed
    waits.gone();
    await tick();
    expect(waits.closes).toHaveLength(1);
  });

  it('whose socket closes leaves the line: not closed, nothing held, and reads are dropped', async () => {
    const full = track(holder());
    const waits = track(connection());
    const wire = frame(randomBytes(MiB));
    expect(waits.read(wire.subarray(0, 100))).toBe(false);
    waits.gone();
    await tick();
    expect(waits.closes).toEqual([]);
    expect(waits.read(wire.subarray(100))).toBe(true);
    expect(waits.handed).toHaveLength(1);
    full.gone();
    await tick();
    // it was granted nothing after it left
    expect(assemblingBytes()).toBe(0);
    expect(waits.handed).toHaveLength(1);
    expect(waits.resumes()).toBe(0);
  });
});

describe('a message whose pieces meet a total nearly full', () => {
  it('waits again for a piece that does not fit after the one admitted, then goes on', async () => {
    /** A piece of a text message (key zero), `fin` on the last. */
    const piece = (first: boolean, fin: boolean, n: number) =>
      Buffer.concat([
        Buffer.from([(fin ? 0x80 : 0) | (first ? 1 : 0), 0x80 | n, 0, 0, 0, 0]),
        Buffer.alloc(n, 0x61),
      ]);
    // the total full but for two pieces' charge, which a second holder then takes
    const big = track(connection());
    big.read(header(TOTAL - 2 * PIECE_CHARGE, randomBytes(4)));
    const small = track(connection());
    small.read(Buffer.concat([piece(true, false, 1), piece(false, false, 1)]));
    expect(assemblingBytes()).toBe(TOTAL);
    // a message of three pieces in one read: the first waits
    const waits = track(connection());
    expect(
      waits.read(
        Buffer.concat([piece(true, false, 100), piece(false, false, 100), piece(false, true, 100)]),
      ),
    ).toBe(false);
    // room for two pieces: the first two go on, the last does not fit and waits in turn
    small.gone();
    await tick();
    await tick();
    expect(assemblingBytes()).toBe(TOTAL);
    expect(waits.resumes()).toBe(0);
    // the rest of the total given back: the last piece goes on, and the socket is read again
    big.gone();
    await tick();
    await tick();
    expect(Buffer.concat(waits.handed).includes(Buffer.alloc(100, 0x61))).toBe(true);
    expect(waits.resumes()).toBe(1);
    expect(assemblingBytes()).toBe(0); // the message is whole: its pieces were let go
  });
});

describe('a waiting frame granted room as its socket closes', () => {
  it('gives the room back: the grant and the close in the same tick leave nothing held', async () => {
    const full = track(holder());
    const waits = track(connection());
    const wire = frame(randomBytes(MiB));
    expect(waits.read(wire.subarray(0, 100))).toBe(false);
    // the holder leaves (room is granted to the waiting one) and, before the grant is seen,
    // the waiting one's socket closes too
    full.gone();
    waits.gone();
    await tick();
    expect(assemblingBytes()).toBe(0);
    expect(waits.resumes()).toBe(0);
  });
});

describe('a long frame admitted', () => {
  it('is read on while its payload is assembled, unless ws is full', async () => {
    const c = track(connection());
    const payload = randomBytes(MiB);
    const wire = frame(payload);
    expect(c.read(wire.subarray(0, 100))).toBe(true);
    expect(c.handed).toHaveLength(1);
    // nothing is handed to ws for the middle of the payload: whether to read on is ws's say
    expect(c.read(wire.subarray(100, 5000))).toBe(true);
    c.ws._receiver.writableNeedDrain = true;
    expect(c.read(wire.subarray(5000, 9000))).toBe(false);
    c.ws._receiver.writableNeedDrain = false;
    await tick(); // a turn of the event loop whose bytes are not spent yet (unmask-turns.test.ts)
    expect(c.read(wire.subarray(9000))).toBe(true);
    expect(c.handed).toHaveLength(2);
    expect(c.handed[1]!.equals(payload)).toBe(true);
    expect(assemblingBytes()).toBe(0);
  });
});

describe('a socket that closes', () => {
  it('gives back what its unfinished frame held', () => {
    const c = connection();
    c.read(frame(randomBytes(2 * MiB)).subarray(0, 5000));
    expect(assemblingBytes()).toBe(2 * MiB);
    c.gone();
    expect(assemblingBytes()).toBe(0);
  });
});

describe('a ws without a receiver', () => {
  it('is refused: there would be nothing to feed', () => {
    expect(() => unmaskAsReceived({}, 10)).toThrow(
      'ws: no receiver to feed (a ws version the relay was not written for)',
    );
    expect(() => unmaskAsReceived({ _receiver: {} }, 10)).toThrow(/no receiver to feed/);
  });
});
