/**
 * The relay's unmasking of a client's frames as they arrive (src/server/chromium/unmask.ts): what
 * `ws` is handed is every frame in the clear with a zero masking key (which `ws` skips, so the
 * unmasking is not done again in one pass over a whole frame), and `ws`'s own Receiver reads
 * every message exactly as the client sent it, whatever the frame lengths (7, 16 and 64-bit), the
 * masking keys, fragments and control frames between them, and however the bytes are cut into
 * reads (one byte at a time, at odd memory offsets too). A frame of exactly the cap is read; one
 * byte longer, or of a 64-bit length past it, and everything after it reach `ws` as sent (but
 * that header's key), which closes the connection (1009); an unmasked frame and what follows
 * reach it as sent too (1002).
 */
import { randomBytes } from 'node:crypto';
import type { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import * as ws from 'ws';
import { unmaskAsReceived } from '../../src/server/chromium/unmask.js';

/** `ws`'s own frame reader (exported by ws, not in its type declarations). */
const { Receiver } = ws as unknown as {
  Receiver: new (options: { isServer: boolean; maxPayload: number }) => Writable;
};

interface Frame {
  opcode: number;
  payload: Buffer;
  fin?: boolean;
  /** The masking key; none: unmasked. */
  key?: Buffer | null;
  /** The length the header claims (a lie past the cap), default the payload's. */
  claims?: number;
}

/** One frame as a client writes it. */
function frame({ opcode, payload, fin = true, key = randomBytes(4), claims }: Frame): Buffer {
  const n = claims ?? payload.length;
  const len =
    n < 126
      ? Buffer.from([n])
      : n < 65536
        ? Buffer.from([126, n >> 8, n & 0xff])
        : Buffer.concat([Buffer.from([127]), bigLength(n)]);
  len[0]! |= key ? 0x80 : 0;
  const masked = Buffer.from(payload);
  if (key) for (let i = 0; i < masked.length; i++) masked[i]! ^= key[i & 3]!;
  return Buffer.concat([
    Buffer.from([(fin ? 0x80 : 0) | opcode]),
    len,
    ...(key ? [key] : []),
    masked,
  ]);
}

function bigLength(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/** Frames as a client sends them, and as `ws` is to be handed them (zero key, in the clear). */
function frames(specs: Frame[]): { sent: Buffer; clear: Buffer } {
  const keyed = specs.map((f) => ({ ...f, key: f.key === undefined ? randomBytes(4) : f.key }));
  return {
    sent: Buffer.concat(keyed.map(frame)),
    clear: Buffer.concat(keyed.map((f) => frame({ ...f, key: f.key && Buffer.alloc(4) }))),
  };
}

interface Through {
  /** What `ws`'s receiver was handed, every read together. */
  seen: Buffer;
  messages: Buffer[];
  pings: Buffer[];
  error?: { code: string; status: number };
}

/** `bytes` read by a relay socket in reads of the sizes `cuts` gives, as `ws` then sees them. */
async function through(
  bytes: Buffer,
  max: number,
  cuts: (i: number) => number = () => bytes.length,
): Promise<Through> {
  const receiver = new Receiver({ isServer: true, maxPayload: max });
  const messages: Buffer[] = [];
  const pings: Buffer[] = [];
  let error: { code: string; status: number } | undefined;
  receiver.on('message', (data: Buffer) => messages.push(Buffer.from(data)));
  receiver.on('ping', (data: Buffer) => pings.push(Buffer.from(data)));
  receiver.on('error', (err: Error & { code: string; [k: symbol]: number }) => {
    const status = Object.getOwnPropertySymbols(err)
      .map((s) => err[s])
      .find((v) => typeof v === 'number');
    error ??= { code: err.code, status: status ?? 0 };
  });
  // what ws's receiver is handed, behind the relay's reader (which wraps its `write`)
  const seen: Buffer[] = [];
  const write = receiver.write.bind(receiver);
  receiver.write = ((chunk: Buffer) => {
    seen.push(Buffer.from(chunk));
    return error ? true : write(chunk);
  }) as typeof receiver.write;
  unmaskAsReceived({ _receiver: receiver }, max);
  // reads cut from a larger buffer at an odd offset, as a socket's reads may be
  const backing = Buffer.alloc(bytes.length + 3);
  bytes.copy(backing, 3);
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = Math.max(1, Math.min(cuts(i), bytes.length - at));
    receiver.write(backing.subarray(3 + at, 3 + at + n));
    at += n;
  }
  await new Promise((r) => setImmediate(r));
  return { seen: Buffer.concat(seen), messages, pings, ...(error && { error }) };
}

const MAX = 70_000;
/** Buffers compared as text (a deep comparison of large buffers is slow). */
const b64 = (bufs: Buffer[]) => bufs.map((b) => b.toString('base64'));

describe('frames unmasked as their bytes arrive', () => {
  const sizes = [0, 1, 2, 3, 4, 5, 7, 125, 126, 127, 1000, 65535, 65536, 65541, MAX];
  const sent = sizes.map((n) => randomBytes(n));
  const wire = frames(sent.map((payload) => ({ opcode: 2, payload })));

  it('are handed to ws in the clear and read as sent, in one read', async () => {
    const got = await through(wire.sent, MAX);
    expect(got.seen.equals(wire.clear)).toBe(true);
    expect(b64(got.messages)).toEqual(b64(sent));
  });

  // small frames for small reads (a read is a few microseconds here, whatever its size)
  const small = sent.filter((b) => b.length <= 1000);
  const smallWire = frames(small.map((payload) => ({ opcode: 2, payload })));

  it('one byte at a time', async () => {
    const got = await through(smallWire.sent, MAX, () => 1);
    expect(got.seen.equals(smallWire.clear)).toBe(true);
    expect(b64(got.messages)).toEqual(b64(small));
  });

  it('in reads of every length up to 13 bytes, and in large ones', async () => {
    for (const step of [2, 3, 5, 6, 7, 9, 13]) {
      const got = await through(smallWire.sent, MAX, (i) => step + (i % 3));
      expect(got.seen.equals(smallWire.clear), `${step}`).toBe(true);
      expect(b64(got.messages), `${step}`).toEqual(b64(small));
      expect(got.error, `${step}`).toBeUndefined();
    }
    for (const step of [4099, 65539]) {
      const got = await through(wire.sent, MAX, (i) => step + (i % 3));
      expect(got.seen.equals(wire.clear), `${step}`).toBe(true);
      expect(b64(got.messages), `${step}`).toEqual(b64(sent));
    }
  });

  it('whatever the key, a zero one or one of all ones too', async () => {
    const payload = randomBytes(1031);
    const keys = [Buffer.alloc(4), Buffer.alloc(4, 0xff), Buffer.from([1, 2, 3, 4])];
    const bytes = frames(keys.map((key) => ({ opcode: 2, payload, key })));
    const got = await through(bytes.sent, MAX, (i) => 1 + (i % 11));
    expect(got.seen.equals(bytes.clear)).toBe(true);
    expect(b64(got.messages)).toEqual(b64([payload, payload, payload]));
  });

  it('a message in fragments, with a ping between them, and text', async () => {
    const parts = [randomBytes(10), randomBytes(20_000), randomBytes(3)];
    const text = Buffer.from('{"id":1,"method":"Browser.getVersion"}');
    const bytes = frames([
      { opcode: 2, payload: parts[0]!, fin: false },
      { opcode: 0, payload: parts[1]!, fin: false },
      { opcode: 9, payload: Buffer.from('are you there') },
      { opcode: 0, payload: parts[2]!, fin: true },
      { opcode: 1, payload: text },
    ]);
    const got = await through(bytes.sent, MAX, (i) => 17 + 50 * i);
    expect(got.seen.equals(bytes.clear)).toBe(true);
    expect(b64(got.messages)).toEqual(b64([Buffer.concat(parts), text]));
    expect(got.pings).toEqual([Buffer.from('are you there')]);
  });
});

/** `sent` with the 4 key bytes at `keyAt` zeroed. */
function keyZeroed(sent: Buffer, keyAt: number): Buffer {
  const b = Buffer.from(sent);
  b.fill(0, keyAt, keyAt + 4);
  return b;
}

describe('frames ws refuses', () => {
  it('one byte past the cap, and all after it, reach ws as sent (but its key): 1009', async () => {
    const ok = frames([{ opcode: 2, payload: randomBytes(MAX) }]);
    const past = frame({ opcode: 2, payload: randomBytes(MAX + 1) });
    const after = frame({ opcode: 2, payload: randomBytes(9) });
    const got = await through(Buffer.concat([ok.sent, past, after]), MAX, (i) => 4000 + i);
    // 127, a 64-bit length, then the key
    expect(got.seen.equals(Buffer.concat([ok.clear, keyZeroed(past, 10), after]))).toBe(true);
    expect(got.messages).toHaveLength(1);
    expect(got.error).toEqual({ code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', status: 1009 });
  });

  it('exactly the cap in a 16-bit length is read; one past it is not unmasked', async () => {
    const cap = 1000;
    const ok = frames([{ opcode: 2, payload: randomBytes(cap) }]);
    const past = frame({ opcode: 2, payload: randomBytes(cap + 1) });
    const got = await through(Buffer.concat([ok.sent, past]), cap, () => 7);
    expect(got.seen.equals(Buffer.concat([ok.clear, keyZeroed(past, 4)]))).toBe(true);
    expect(got.error).toEqual({ code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', status: 1009 });
  });

  it('a 64-bit length past the cap, high word set, is not followed: 1009', async () => {
    const small = frames([{ opcode: 2, payload: randomBytes(5) }]);
    const lie = frame({ opcode: 2, payload: randomBytes(16), claims: 2 ** 32 + 10 });
    const got = await through(Buffer.concat([small.sent, lie]), MAX, () => 3);
    expect(got.seen.equals(Buffer.concat([small.clear, keyZeroed(lie, 10)]))).toBe(true);
    expect(got.messages).toHaveLength(1);
    expect(got.error).toEqual({ code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', status: 1009 });
  });

  it('an unmasked frame, and all after it, reach ws as sent: 1002', async () => {
    const first = frames([{ opcode: 2, payload: randomBytes(9) }]);
    const bare = frame({ opcode: 2, payload: randomBytes(9), key: null });
    const after = frame({ opcode: 2, payload: randomBytes(9) });
    const got = await through(Buffer.concat([first.sent, bare, after]), MAX, () => 2);
    expect(got.seen.equals(Buffer.concat([first.clear, bare, after]))).toBe(true);
    expect(got.messages).toHaveLength(1);
    expect(got.error).toEqual({ code: 'WS_ERR_EXPECTED_MASK', status: 1002 });
  });
});
