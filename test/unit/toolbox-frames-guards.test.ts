/**
 * The toolbox framing against a peer that does not play along (the toolbox runs inside the
 * instance): a header that is JSON but not an object, a header without `payload_bytes`, a header
 * length exactly at the bound, and frames cut into chunks of every size, so that the decoder's
 * joining and splitting of chunks is exercised where a frame part ends inside, at the end of, or
 * across chunks.
 */
import { describe, expect, it } from 'vitest';
import {
  encodeFrame,
  FrameDecoder,
  FrameError,
  MAX_HEADER_BYTES,
  type Frame,
} from '../../src/server/toolbox/frames.js';

/** A frame with a header written as given (not through `encodeFrame`). */
function raw(headerText: string, payload = Buffer.alloc(0)): Buffer {
  const json = Buffer.from(headerText, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(json.length);
  return Buffer.concat([len, json, payload]);
}

const decodeAll = (wire: Buffer, chunk: number): Frame[] => {
  const d = new FrameDecoder();
  const out: Frame[] = [];
  for (let i = 0; i < wire.length; i += chunk) out.push(...d.push(wire.subarray(i, i + chunk)));
  return out;
};

describe('encodeFrame', () => {
  it('without a payload, or with an empty one, says payload_bytes 0 and decodes', () => {
    for (const parts of [
      encodeFrame({ id: 1, op: 'ls' }),
      encodeFrame({ id: 1, op: 'ls' }, new Uint8Array(0)),
    ]) {
      const frames = new FrameDecoder().push(Buffer.concat(parts));
      expect(frames).toHaveLength(1);
      expect(frames[0]!.header).toEqual({ id: 1, op: 'ls', payload_bytes: 0 });
      expect(frames[0]!.payload.length).toBe(0);
    }
  });

  it('counts the header in bytes of UTF-8, not characters', () => {
    const parts = encodeFrame({ path: 'ü/日本/🙂' });
    const len = parts[0]!.readUInt32BE(0);
    expect(len).toBe(Buffer.byteLength(JSON.stringify({ path: 'ü/日本/🙂', payload_bytes: 0 })));
    expect(new FrameDecoder().push(Buffer.concat(parts))[0]!.header.path).toBe('ü/日本/🙂');
  });

  it('sends a payload given as a view into a larger buffer as just that view', () => {
    const big = Buffer.from('0123456789');
    const view = new Uint8Array(big.buffer, big.byteOffset + 3, 4);
    const [frame] = new FrameDecoder().push(Buffer.concat(encodeFrame({ id: 2 }, view)));
    expect(frame!.header.payload_bytes).toBe(4);
    expect(frame!.payload.toString()).toBe('3456');
  });
});

describe('FrameDecoder refuses', () => {
  it('a header that is JSON but not an object', () => {
    for (const text of ['null', '5', '"s"', 'true', '[]', '[{"payload_bytes":0}]']) {
      const err = (() => {
        try {
          new FrameDecoder().push(raw(text));
        } catch (e) {
          return e;
        }
      })();
      expect(err, text).toBeInstanceOf(FrameError);
      expect((err as Error).message, text).toBe('frame header is not an object');
      expect((err as Error).name).toBe('FrameError');
    }
  });

  it('a header that is not JSON at all', () => {
    expect(() => new FrameDecoder().push(raw('{"id":'))).toThrow('frame header is not JSON');
    expect(() => new FrameDecoder().push(raw('\u0000'))).toThrow(FrameError);
  });

  it('a header past the bound at once, but waits for one exactly at the bound', () => {
    const at = Buffer.alloc(4);
    at.writeUInt32BE(MAX_HEADER_BYTES);
    const d = new FrameDecoder();
    expect(d.push(at)).toEqual([]);
    expect(d.push(Buffer.from('{'))).toEqual([]); // still waiting for the rest
    const over = Buffer.alloc(4);
    over.writeUInt32BE(MAX_HEADER_BYTES + 1);
    expect(() => new FrameDecoder().push(over)).toThrow(
      `frame header of ${MAX_HEADER_BYTES + 1} bytes (at most ${MAX_HEADER_BYTES})`,
    );
  });
});

describe('FrameDecoder accepts', () => {
  it('a header without payload_bytes as a frame without payload', () => {
    const frames = new FrameDecoder().push(Buffer.concat([raw('{"id":7}'), raw('{"id":8}')]));
    expect(frames.map((f) => [f.header.id, f.payload.length])).toEqual([
      [7, 0],
      [8, 0],
    ]);
  });

  it('the same frames whatever the chunk size', () => {
    const sent = [
      { header: { id: 1 }, payload: Buffer.from('abc') },
      { header: { id: 2, op: 'read' }, payload: Buffer.alloc(0) },
      { header: { id: 3 }, payload: Buffer.from('0123456789abcdef') },
      { header: { id: 4, name: 'ü' }, payload: Buffer.from([0, 1, 2, 255]) },
    ];
    const wire = Buffer.concat(sent.flatMap((f) => encodeFrame(f.header, f.payload)));
    for (let chunk = 1; chunk <= wire.length; chunk++) {
      const got = decodeAll(wire, chunk);
      expect(
        got.map((f) => [f.header.id, f.payload.toString('hex')]),
        `chunks of ${chunk}`,
      ).toEqual(sent.map((f) => [f.header.id, f.payload.toString('hex')]));
    }
  });

  it('a stream cut at every pair of points', () => {
    const wire = Buffer.concat([
      ...encodeFrame({ id: 'a' }, Buffer.from('xyz')),
      ...encodeFrame({ id: 'b' }, Buffer.from('pqrs')),
    ]);
    for (let i = 0; i <= wire.length; i++) {
      for (let j = i; j <= wire.length; j++) {
        const d = new FrameDecoder();
        const got = [
          ...d.push(wire.subarray(0, i)),
          ...d.push(wire.subarray(i, j)),
          ...d.push(wire.subarray(j)),
        ];
        expect(
          got.map((f) => `${String(f.header.id)}:${f.payload.toString()}`),
          `${i}/${j}`,
        ).toEqual(['a:xyz', 'b:pqrs']);
      }
    }
  });
});
