/**
 * The relay's unmasking of a client's frames as they arrive (src/server/chromium/unmask.ts), as
 * `ws` then reads them: `ws`'s own Receiver, after the unmasking on the socket's data, gets every
 * message exactly as the client sent it, whatever the frame lengths (7, 16 and 64-bit), the
 * masking keys, fragments and control frames between them, and however the bytes are cut into
 * reads (one byte at a time, at odd memory offsets too). A frame of exactly the cap is read; one
 * byte longer, or of a 64-bit length past it, reaches `ws` as sent, which closes the connection
 * (1009); an unmasked frame reaches it as sent too (1002).
 */
import { randomBytes } from 'node:crypto';
import { PassThrough, type Writable } from 'node:stream';
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

/** `bytes` read by a relay socket in reads of the sizes `cuts` gives, as `ws` then sees them. */
async function through(
  bytes: Buffer,
  max: number,
  cuts: (i: number) => number = () => bytes.length,
): Promise<{ messages: Buffer[]; pings: Buffer[]; error?: { code: string; status: number } }> {
  const socket = new PassThrough();
  unmaskAsReceived(socket, max);
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
  socket.on('data', (chunk: Buffer) => {
    if (!error) receiver.write(chunk);
  });
  // reads cut from a larger buffer at an odd offset, as a socket's reads may be
  const backing = Buffer.alloc(bytes.length + 3);
  bytes.copy(backing, 3);
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = Math.max(1, Math.min(cuts(i), bytes.length - at));
    socket.write(backing.subarray(3 + at, 3 + at + n));
    at += n;
  }
  await new Promise((r) => setImmediate(r));
  return { messages, pings, ...(error && { error }) };
}

const MAX = 70_000;
/** Buffers compared as text (a deep comparison of large buffers is slow). */
const b64 = (bufs: Buffer[]) => bufs.map((b) => b.toString('base64'));

describe('frames unmasked as their bytes arrive', () => {
  const sizes = [0, 1, 2, 3, 4, 5, 7, 125, 126, 127, 1000, 65535, 65536, 65541, MAX];
  const sent = sizes.map((n) => randomBytes(n));
  const wire = Buffer.concat(sent.map((payload) => frame({ opcode: 2, payload })));

  it('reach ws as sent, in one read', async () => {
    expect(b64((await through(wire, MAX)).messages)).toEqual(b64(sent));
  });

  // small frames for small reads (a read is a few microseconds here, whatever its size)
  const small = sent.filter((b) => b.length <= 1000);
  const smallWire = Buffer.concat(small.map((payload) => frame({ opcode: 2, payload })));

  it('reach ws as sent, one byte at a time', async () => {
    expect(b64((await through(smallWire, MAX, () => 1)).messages)).toEqual(b64(small));
  });

  it('reach ws as sent, in reads of every length up to 13 bytes, and in large ones', async () => {
    for (const step of [2, 3, 5, 6, 7, 9, 13]) {
      const got = await through(smallWire, MAX, (i) => step + (i % 3));
      expect(b64(got.messages), `${step}`).toEqual(b64(small));
      expect(got.error, `${step}`).toBeUndefined();
    }
    for (const step of [4099, 65539]) {
      const got = await through(wire, MAX, (i) => step + (i % 3));
      expect(b64(got.messages), `${step}`).toEqual(b64(sent));
      expect(got.error, `${step}`).toBeUndefined();
    }
  });

  it('whatever the key, a zero one or one of all ones too', async () => {
    const payload = randomBytes(1031);
    const keys = [Buffer.alloc(4), Buffer.alloc(4, 0xff), Buffer.from([1, 2, 3, 4])];
    const bytes = Buffer.concat(keys.map((key) => frame({ opcode: 2, payload, key })));
    expect(await through(bytes, MAX, (i) => 1 + (i % 11)).then((r) => r.messages)).toEqual([
      payload,
      payload,
      payload,
    ]);
  });

  it('a message in fragments, with a ping between them, and text', async () => {
    const parts = [randomBytes(10), randomBytes(20_000), randomBytes(3)];
    const bytes = Buffer.concat([
      frame({ opcode: 2, payload: parts[0]!, fin: false }),
      frame({ opcode: 0, payload: parts[1]!, fin: false }),
      frame({ opcode: 9, payload: Buffer.from('are you there') }),
      frame({ opcode: 0, payload: parts[2]!, fin: true }),
      frame({ opcode: 1, payload: Buffer.from('{"id":1,"method":"Browser.getVersion"}') }),
    ]);
    const got = await through(bytes, MAX, (i) => 17 + 50 * i);
    expect(b64(got.messages)).toEqual(
      b64([Buffer.concat(parts), Buffer.from('{"id":1,"method":"Browser.getVersion"}')]),
    );
    expect(got.pings).toEqual([Buffer.from('are you there')]);
  });
});

describe('frames ws refuses', () => {
  it('one byte past the cap reaches ws as sent: it closes with 1009', async () => {
    const ok = randomBytes(MAX);
    const bytes = Buffer.concat([
      frame({ opcode: 2, payload: ok }),
      frame({ opcode: 2, payload: randomBytes(MAX + 1) }),
    ]);
    const got = await through(bytes, MAX, (i) => 4000 + i);
    expect(b64(got.messages)).toEqual(b64([ok]));
    expect(got.error).toEqual({ code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', status: 1009 });
  });

  it('a 64-bit length past the cap, high word set, closes with 1009', async () => {
    const small = randomBytes(5);
    const bytes = Buffer.concat([
      frame({ opcode: 2, payload: small }),
      frame({ opcode: 2, payload: randomBytes(16), claims: 2 ** 32 + 10 }),
    ]);
    const got = await through(bytes, MAX, () => 3);
    expect(got.messages).toEqual([small]);
    expect(got.error).toEqual({ code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', status: 1009 });
  });

  it('an unmasked frame closes with 1002, after the masked ones before it', async () => {
    const first = randomBytes(9);
    const bytes = Buffer.concat([
      frame({ opcode: 2, payload: first }),
      frame({ opcode: 2, payload: randomBytes(9), key: null }),
    ]);
    const got = await through(bytes, MAX, () => 2);
    expect(got.messages).toEqual([first]);
    expect(got.error).toEqual({ code: 'WS_ERR_EXPECTED_MASK', status: 1002 });
  });
});
