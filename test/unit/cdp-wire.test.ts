/**
 * Messages from Chromium's pipe as the relay routes them (chromium/wire.ts): a reply reaches its
 * client under the client's own id, an event of a session loses only its session tail, a message
 * of an unusual shape is decoded and routed the same way, and anything that is not a JSON object
 * (or too long to decode) is refused, so a process of the instance writing into the pipe cannot
 * misroute a reply or make the server decode megabytes.
 */
import { describe, expect, it } from 'vitest';
import { CDP_MAX_DECODED_BYTES } from '../../src/api/cdp-limits.js';
import { errorReply, incoming } from '../../src/server/chromium/wire.js';

const msg = (text: string) => incoming(Buffer.from(text));
const json = (b: Buffer) => JSON.parse(b.toString()) as Record<string, unknown>;

describe('a message in the shape Chromium writes', () => {
  const reply = '{"id":41,"result":{"x":1},"sessionId":"S1"}';
  const event = '{"method":"Page.loadEventFired","params":{"t":1},"sessionId":"S1"}';

  it('a reply gets the client id, and keeps its session unless it is cut', () => {
    expect(json(msg(reply).rewrite(7, false))).toEqual({
      id: 7,
      result: { x: 1 },
      sessionId: 'S1',
    });
    expect(json(msg(reply).rewrite(7, true))).toEqual({ id: 7, result: { x: 1 } });
  });

  it("a reply whose client id fits in the wire id's digits is renumbered in place, not copied", () => {
    const data = Buffer.from('{"id":4096,"result":{"v":"big"},"sessionId":"S1"}');
    const kept = incoming(data).rewrite(7, false);
    expect([kept.buffer, kept.byteOffset]).toEqual([data.buffer, data.byteOffset]);
    expect(kept.toString()).toBe('{"id":7   ,"result":{"v":"big"},"sessionId":"S1"}');
    const same = Buffer.from('{"id":4096,"result":{"v":"big"},"sessionId":"S1"}');
    const cut = incoming(same).rewrite(1234, true);
    expect([cut.buffer, cut.byteOffset]).toEqual([same.buffer, same.byteOffset]);
    expect(cut.toString()).toBe('{"id":1234,"result":{"v":"big"}}');
    // one more digit than the wire id has: a copy, exact
    const longer = Buffer.from('{"id":99,"result":{},"sessionId":"S1"}');
    const copied = incoming(longer).rewrite(100, true);
    expect(copied.toString()).toBe('{"id":100,"result":{}}');
    expect(longer.toString()).toBe('{"id":99,"result":{},"sessionId":"S1"}');
  });

  it('an event keeps its shape: no id is added to it', () => {
    expect(json(msg(event).rewrite(undefined, true))).toEqual({
      method: 'Page.loadEventFired',
      params: { t: 1 },
    });
    expect(json(msg(event).rewrite(9, false))).toEqual(JSON.parse(event));
  });

  it('a message of no session is left whole when asked to cut one', () => {
    const plain = '{"id":3,"result":{"a":{}}}';
    expect(json(msg(plain).rewrite(5, true))).toEqual({ id: 5, result: { a: {} } });
    const ev = '{"method":"Target.targetCreated","params":{"i":{}}}';
    expect(msg(ev).rewrite(undefined, true).toString()).toBe(ev);
  });
});

describe('a message of another shape is decoded and routed the same way', () => {
  it('a reply with its keys in another order is still its id, and ok only with a result', () => {
    const ok = msg('{"result":{},"id":12,"x":{}}');
    expect(ok.id).toBe(12);
    expect(ok.ok).toBe(true);
    const failed = msg('{"error":{"code":-32000},"id":13,"x":{}}');
    expect(failed.id).toBe(13);
    expect(failed.ok).toBe(false);
  });

  it('fields of the wrong type route nowhere', () => {
    const odd = msg('{"id":"12","method":5,"sessionId":7,"params":{"x":{}}}');
    expect(odd.id).toBeUndefined();
    expect(odd.method).toBeUndefined();
    expect(odd.sessionId).toBeUndefined();
    const named = msg('{"params":{},"method":"Page.x","sessionId":"S2","z":{}}');
    expect(named.method).toBe('Page.x');
    expect(named.sessionId).toBe('S2');
  });

  it('rewrites as asked: a new id, the session cut only when asked, nothing else lost', () => {
    const m = msg('{"result":{"v":1},"id":12,"sessionId":"S3","x":{}}');
    expect(json(m.rewrite(4, false))).toEqual({ result: { v: 1 }, id: 4, sessionId: 'S3', x: {} });
    expect(json(m.rewrite(4, true))).toEqual({ result: { v: 1 }, id: 4, x: {} });
    expect(json(m.rewrite(undefined, false))).toEqual({
      result: { v: 1 },
      id: 12,
      sessionId: 'S3',
      x: {},
    });
    expect(m.parse()).toEqual({ result: { v: 1 }, id: 12, sessionId: 'S3', x: {} });
  });
});

describe('what is refused', () => {
  it.each(['5', '"text"', 'null', '[{"id":1}]', 'true'])('%s is not a JSON object', (text) => {
    expect(() => msg(text)).toThrow(/not a JSON object/);
  });

  it(`decodes up to ${CDP_MAX_DECODED_BYTES} bytes and no more`, () => {
    const sized = (n: number) => {
      const head = '{"id":"x","pad":"';
      return Buffer.from(head + 'a'.repeat(n - head.length - 2) + '"}');
    };
    expect(sized(CDP_MAX_DECODED_BYTES)).toHaveLength(CDP_MAX_DECODED_BYTES);
    expect(incoming(sized(CDP_MAX_DECODED_BYTES)).id).toBeUndefined();
    expect(() => incoming(sized(CDP_MAX_DECODED_BYTES + 1))).toThrow(/bytes to decode/);
  });
});

describe('errorReply', () => {
  it('carries the id when there is one, and no id key otherwise', () => {
    expect(json(errorReply(3, -32601, 'no'))).toEqual({
      id: 3,
      error: { code: -32601, message: 'no' },
    });
    expect(errorReply(undefined, -32600, 'bad').toString()).toBe(
      '{"error":{"code":-32600,"message":"bad"}}',
    );
  });
});
