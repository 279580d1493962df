/**
 * The forwarder's view of a joined WebSocket (src/server/http/cluster/forward.ts): where the frames of
 * one direction end, whether a close went by, and the close frame it sends when an owner node
 * vanished (4001 `node_lost`).
 */
import { describe, expect, it } from 'vitest';
import { closeFrame, FrameBoundary } from '../../src/server/http/cluster/forward.js';

/** A server-to-client frame (unmasked) or, with `mask`, a client-to-server one. */
function frame(opcode: number, payload: Buffer, mask = false): Buffer {
  const len = payload.length;
  const head =
    len < 126
      ? Buffer.from([0x80 | opcode, len])
      : len < 65536
        ? Buffer.from([0x80 | opcode, 126, len >> 8, len & 0xff])
        : Buffer.concat([Buffer.from([0x80 | opcode, 127]), bigLen(len)]);
  if (!mask) return Buffer.concat([head, payload]);
  head[1]! |= 0x80;
  const key = Buffer.from([1, 2, 3, 4]);
  const masked = Buffer.from(payload.map((b, i) => b ^ key[i % 4]!));
  return Buffer.concat([head, key, masked]);
}

function bigLen(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

describe('FrameBoundary', () => {
  it('is at a boundary between frames, and not inside one, however the bytes are cut', () => {
    const stream = Buffer.concat([
      frame(1, Buffer.from('{"id":1}')),
      frame(2, Buffer.alloc(300, 7)),
      frame(1, Buffer.alloc(70_000, 0x61)),
      frame(1, Buffer.from('x'), true),
    ]);
    const ends = new Set<number>();
    let at = 0;
    for (const f of [10, 304, 70_010, 7]) ends.add((at += f));
    for (const cut of [1, 2, 3, 7, 100, 4096]) {
      const b = new FrameBoundary();
      for (let i = 0; i < stream.length; i += cut) {
        b.feed(stream.subarray(i, i + cut));
        const end = Math.min(i + cut, stream.length);
        expect(b.atBoundary, `after ${end} bytes in pieces of ${cut}`).toBe(ends.has(end));
      }
      expect(b.closed).toBe(false);
    }
  });

  it('notices a close frame going by', () => {
    const b = new FrameBoundary();
    b.feed(frame(1, Buffer.from('hi')));
    expect(b.closed).toBe(false);
    b.feed(closeFrame(1000, 'bye'));
    expect(b.closed).toBe(true);
    expect(b.atBoundary).toBe(true);
  });
});

describe('closeFrame', () => {
  it('is a final close frame with the code and the reason', () => {
    const f = closeFrame(4001, 'node_lost');
    expect(f[0]).toBe(0x88);
    expect(f[1]).toBe(2 + 'node_lost'.length);
    expect(f.readUInt16BE(2)).toBe(4001);
    expect(f.subarray(4).toString()).toBe('node_lost');
  });

  it('keeps a reason within the 123 bytes a control frame allows', () => {
    const f = closeFrame(4001, 'x'.repeat(500));
    expect(f[1]).toBe(125);
    expect(f.length).toBe(127);
  });
});
