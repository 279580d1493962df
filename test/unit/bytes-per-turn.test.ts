/**
 * What the relay's clients send and what Chromium writes to its DevTools pipe are worked through
 * at most about 1 MiB a turn of the event loop, all connections together (`bytesPerTurn` of
 * src/internal/cpu-share.ts). For a client (src/server/chromium/unmask.ts), the read that spends
 * the turn's bytes tells `ws` to stop reading its socket, and the socket is read again in the
 * next turn, unless the relay paused it, `ws` is full or a frame waits for the assembling total;
 * the pipe (src/server/chromium/pipe.ts) pauses and resumes itself, its messages whole and in
 * order. Without it, six clients sending long frames at full speed gave the main thread 12 MiB
 * to unmask and copy in one turn.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { CDP_MAX_ASSEMBLING_BYTES_TOTAL } from '../../src/api/cdp-limits.js';
import { CdpPipe } from '../../src/server/chromium/pipe.js';
import { unmaskAsReceived } from '../../src/server/chromium/unmask.js';

const MiB = 1024 * 1024;

/** A masked binary frame (FIN) carrying `payload`. */
function frame(payload: Buffer): Buffer {
  const key = randomBytes(4);
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i]! ^= key[i & 3]!;
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(payload.length));
  return Buffer.concat([Buffer.from([0x82, 0x80 | 127]), len, key, masked]);
}

/** A connection as the relay hands it over: `ws` with its receiver and its socket. */
function connection(maxPayload = 128 * MiB) {
  const socket = new EventEmitter();
  let resumes = 0;
  const ws = {
    _receiver: { write: (_chunk: Buffer) => true, writableNeedDrain: false },
    _socket: {
      once: (event: 'close', listener: () => void) => socket.once(event, listener),
      resume: () => resumes++,
    },
    isPaused: false,
    close: () => {},
  };
  unmaskAsReceived(ws, maxPayload);
  return {
    ws,
    resumes: () => resumes,
    read: (chunk: Buffer) => ws._receiver.write(chunk),
    gone: () => socket.emit('close'),
  };
}

/** `wire` in socket reads of 64 KiB: what each read told `ws`. */
function readAll(c: ReturnType<typeof connection>, wire: Buffer): boolean[] {
  const said: boolean[] = [];
  for (let at = 0; at < wire.length; at += 64 * 1024) {
    said.push(c.read(wire.subarray(at, at + 64 * 1024)));
  }
  return said;
}

describe('the bytes of one turn', () => {
  it('stop the socket that spends them, read again in the next turn', async () => {
    await tick();
    const c = connection();
    const said = readAll(c, frame(randomBytes(2 * MiB)));
    // the 16th read of 64 KiB spends the turn's MiB: from there each read says stop
    expect(said.slice(0, 15).every(Boolean)).toBe(true);
    expect(said.slice(15).some(Boolean)).toBe(false);
    expect(c.resumes()).toBe(0);
    await tick();
    expect(c.resumes()).toBe(1);
    // a new turn: its bytes are not spent
    expect(c.read(frame(randomBytes(1000)))).toBe(true);
  });

  it('stop and resume the same socket turn after turn', async () => {
    await tick();
    const c = connection();
    for (let turn = 1; turn <= 3; turn++) {
      expect(readAll(c, frame(randomBytes(MiB))).at(-1)).toBe(false);
      await tick();
      expect(c.resumes()).toBe(turn);
    }
  });

  it('are shared by every connection', async () => {
    await tick();
    const [a, b] = [connection(), connection()];
    expect(readAll(a, frame(randomBytes(MiB))).at(-1)).toBe(false);
    expect(b.read(frame(randomBytes(10)))).toBe(false);
    await tick();
    expect([a.resumes(), b.resumes()]).toEqual([1, 1]);
  });

  it('leave unread a socket whose next frame waits for room in the assembling total', async () => {
    await tick();
    const holder = connection(CDP_MAX_ASSEMBLING_BYTES_TOTAL);
    // the header of a frame as long as the whole total: it holds all of it
    const key = randomBytes(4);
    const len = Buffer.alloc(8);
    len.writeBigUInt64BE(BigInt(CDP_MAX_ASSEMBLING_BYTES_TOTAL));
    holder.read(Buffer.concat([Buffer.from([0x82, 0x80 | 127]), len, key]));
    await tick();
    const c = connection();
    // frames under the length that is assembled (the total is full) spend the turn
    let last = true;
    for (let i = 0; i < 20; i++) last = c.read(frame(randomBytes(60 * 1024)));
    expect(last).toBe(false);
    // then the header of a long frame that does not fit: it waits, its socket unread
    expect(c.read(frame(randomBytes(2 * MiB)).subarray(0, 14))).toBe(false);
    await tick();
    expect(c.resumes()).toBe(0);
    holder.gone(); // room: the waiting frame is admitted and its socket read again
    await tick();
    expect(c.resumes()).toBe(1);
    c.gone();
  });

  it('leave unread a socket the relay paused, ws is full for, or that closed', async () => {
    await tick();
    const [paused, full, closed] = [connection(), connection(), connection()];
    expect(readAll(paused, frame(randomBytes(MiB))).at(-1)).toBe(false);
    for (const c of [full, closed]) expect(c.read(frame(randomBytes(10)))).toBe(false);
    paused.ws.isPaused = true;
    full.ws._receiver.writableNeedDrain = true;
    closed.gone();
    await tick();
    expect([paused.resumes(), full.resumes(), closed.resumes()]).toEqual([0, 0, 0]);
  });
});

describe("Chromium's pipe", () => {
  it("reads a turn's bytes, then the rest in the next turns, every message whole and in order", async () => {
    await tick();
    const fromChromium = new PassThrough({ highWaterMark: 64 * 1024 });
    const pipe = new CdpPipe(new PassThrough(), fromChromium, 8 * MiB);
    const got: string[] = [];
    pipe.listen({ message: (m) => got.push(m.toString()), close: () => {} });
    const messages = Array.from(
      { length: 48 },
      (_, i) => `{"id":${i},"x":"${'y'.repeat(64 * 1024)}"}`,
    );
    for (const m of messages) fromChromium.write(`${m}\0`);
    // written at once: read as a stream reads, 64 KiB at a time, until the turn's MiB is spent
    await new Promise((r) => process.nextTick(r));
    expect(got.length).toBeGreaterThan(0);
    expect(got.length).toBeLessThan(20);
    expect(fromChromium.isPaused()).toBe(true);
    while (got.length < messages.length) await tick();
    expect(got).toEqual(messages);
    await tick();
    expect(fromChromium.isPaused()).toBe(false); // read again once its turn's bytes are not spent
    expect(pipe.isOpen).toBe(true);
  });
});
