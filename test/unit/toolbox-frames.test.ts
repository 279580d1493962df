/** The toolbox's wire format (src/server/toolbox/frames.ts): frames survive any cut. */
import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameDecoder, MAX_HEADER_BYTES } from '../../src/server/toolbox/frames.js';

const bytes = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7) % 256));

describe('toolbox frames', () => {
  it('round-trip headers and binary payloads, cut at every byte', () => {
    const sent = [
      { header: { id: 1, op: 'stat', path: 'é/ü' }, payload: Buffer.alloc(0) },
      { header: { id: 2, op: 'write' }, payload: bytes(300) },
      { header: { id: 3, ok: true, entries: [['a', true]] }, payload: Buffer.from([0, 255, 10]) },
    ];
    const wire = Buffer.concat(sent.flatMap((f) => encodeFrame(f.header, f.payload)));
    const decoder = new FrameDecoder();
    const got = [];
    for (let i = 0; i < wire.length; i++) got.push(...decoder.push(wire.subarray(i, i + 1)));
    expect(got.map((f) => f.header)).toEqual(
      sent.map((f) => ({ ...f.header, payload_bytes: f.payload.length })),
    );
    expect(got.map((f) => [...f.payload])).toEqual(sent.map((f) => [...f.payload]));
  });

  it('decodes several frames from one chunk, and a frame spread over many', () => {
    const a = encodeFrame({ id: 1 }, bytes(5));
    const b = encodeFrame({ id: 2 }, bytes(100_000));
    const decoder = new FrameDecoder();
    const wire = Buffer.concat([...a, ...b]);
    const first = decoder.push(wire.subarray(0, 40_000));
    expect(first.map((f) => f.header.id)).toEqual([1]);
    const second = [
      ...decoder.push(wire.subarray(40_000, 70_000)),
      ...decoder.push(wire.subarray(70_000)),
    ];
    expect(second.map((f) => f.header.id)).toEqual([2]);
    expect(second[0]!.payload.equals(bytes(100_000))).toBe(true);
  });

  it('does not copy the payload when encoding', () => {
    const payload = bytes(10);
    const parts = encodeFrame({ id: 1 }, payload);
    expect(parts[2]!.buffer).toBe(payload.buffer);
  });

  it('refuses a malformed stream', () => {
    const huge = Buffer.alloc(4);
    huge.writeUInt32BE(MAX_HEADER_BYTES + 1);
    expect(() => new FrameDecoder().push(huge)).toThrow(/header of/);
    const list = Buffer.from('[1]');
    const len = Buffer.alloc(4);
    len.writeUInt32BE(list.length);
    expect(() => new FrameDecoder().push(Buffer.concat([len, list]))).toThrow(/not an object/);
  });
});
