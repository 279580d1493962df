/**
 * How the relay reads one `cdp_url` client's command (src/server/chromium/command.ts), piece by
 * piece: where decoding stops and locating starts, which shapes are located, what a refusal
 * answers, and the pass that checks a located command's params are one object (the check that
 * keeps a params object from closing early and smuggling a `sessionId` to the top level).
 */
import { describe, expect, it } from 'vitest';
import {
  clientCommand,
  type ClientCommand,
  MAX_CLIENT_CONTAINERS,
  NOT_ONE_OBJECT,
  wholeObject,
  wireCommand,
  INSPECTED,
} from '../../src/server/chromium/command.js';
import { CDP_LOCATE_ABOVE_BYTES, CDP_MAX_DECODED_BYTES } from '../../src/api/cdp-limits.js';

const buf = (text: string) => Buffer.from(text, 'latin1');
/** `{"id":1,"method":"M","params":{"e":"xxx…"}}…` padded with `x`s to exactly `size` bytes. */
function sized(size: number, id = 1, method = 'Runtime.evaluate', tail = '}') {
  const head = `{"id":${id},"method":"${method}","params":{"e":"`;
  const end = `"}${tail}`;
  return buf(head + 'x'.repeat(size - head.length - end.length) + end);
}
/** The command read, its type asserted by the test's own expectations. */
const read = (r: ReturnType<typeof clientCommand>) => r as ClientCommand;
const reply = (r: unknown) => {
  expect(r).toHaveProperty('refused');
  return JSON.parse((r as { refused: Buffer }).refused.toString()) as {
    id?: number;
    error: { code: number; message: string };
  };
};

describe('clientCommand: decoded or located', () => {
  it('decodes a command up to the locating size, and locates one a byte larger', () => {
    const frame = '{"id":1,"method":"Runtime.evaluate","params":{"e":""}}'.length;
    const at = clientCommand(sized(CDP_LOCATE_ABOVE_BYTES));
    expect(at).toMatchObject({ id: 1, method: 'Runtime.evaluate' });
    expect(at).not.toHaveProperty('raw');
    expect((read(at).params as { e: string }).e).toHaveLength(CDP_LOCATE_ABOVE_BYTES - frame);
    const over = clientCommand(sized(CDP_LOCATE_ABOVE_BYTES + 1));
    expect(over).toMatchObject({ id: 1, method: 'Runtime.evaluate', params: {} });
    expect((over as { raw: Buffer }).raw.subarray(0, 6).toString()).toBe('{"e":"');
    expect((over as { raw: Buffer }).raw.at(-1)).toBe(0x7d);
  });

  it('decodes a large command of another shape up to the decoded size, then refuses it', () => {
    // a key order no client library writes cannot be located: it is decoded while that is cheap
    const reordered = (size: number) => {
      const head = '{"params":{"e":"';
      const end = '"},"id":4,"method":"Runtime.evaluate","x":1}';
      return buf(head + 'x'.repeat(size - head.length - end.length) + end);
    };
    expect(clientCommand(reordered(CDP_MAX_DECODED_BYTES))).toMatchObject({
      id: 4,
      method: 'Runtime.evaluate',
    });
    expect(reply(clientCommand(reordered(CDP_MAX_DECODED_BYTES + 1))).error.code).toBe(-32600);
  });

  it('decodes a method whose params the mux reads up to the decoded size, whatever its shape', () => {
    const at = clientCommand(sized(CDP_MAX_DECODED_BYTES, 7, 'Page.navigate'));
    expect(at).toMatchObject({ id: 7, method: 'Page.navigate' });
    expect(at).not.toHaveProperty('raw');
    expect(
      reply(clientCommand(sized(CDP_MAX_DECODED_BYTES + 1, 7, 'Page.navigate'))),
    ).toMatchObject({ id: 7, error: { code: -32602 } });
  });

  it('locates a small command of more objects and arrays than it decodes', () => {
    /** A command of `n` objects and arrays: itself, its params, an array of n - 3 arrays. */
    const ofContainers = (n: number) =>
      buf(`{"id":3,"method":"M","params":{"a":[${'[],'.repeat(n - 4)}[]]}}`);
    const over = clientCommand(ofContainers(MAX_CLIENT_CONTAINERS + 1));
    expect(over).toMatchObject({ id: 3, method: 'M' });
    expect((over as { params: object }).params).toEqual({});
    expect((over as { raw: Buffer }).raw.toString()).toMatch(/^\{"a":\[\[\],/);
    const at = clientCommand(ofContainers(MAX_CLIENT_CONTAINERS));
    expect(at).not.toHaveProperty('raw');
    expect((read(at).params as { a: unknown[] }).a).toHaveLength(MAX_CLIENT_CONTAINERS - 3);
  });

  it("answers a small command's mistakes as Chromium does", () => {
    expect(reply(clientCommand(buf('{"id":1,')))).toEqual({
      error: { code: -32700, message: 'Message must be a valid JSON' },
    });
    expect(reply(clientCommand(buf('{"id":1.5,"method":"M"}'))).error.code).toBe(-32600);
    expect(reply(clientCommand(buf('[1]'))).error.code).toBe(-32600);
    expect(reply(clientCommand(buf('{"id":2,"method":7}')))).toMatchObject({
      id: 2,
      error: { code: -32600 },
    });
    expect(reply(clientCommand(buf('{"id":2,"method":"M","params":[]}')))).toMatchObject({
      id: 2,
      error: { code: -32602 },
    });
    expect(clientCommand(buf('{"id":2,"method":"M","sessionId":"S"}'))).toEqual({
      id: 2,
      method: 'M',
      params: {},
      sessionId: 'S',
    });
  });
});

describe('clientCommand: the located shapes', () => {
  const big = 'y'.repeat(CDP_MAX_DECODED_BYTES);
  const params = `{"e":"${big}"}`;

  it("Playwright's, with and without a session", () => {
    const plain = clientCommand(buf(`{"id":9,"method":"M.x","params":${params}}`));
    expect(plain).toMatchObject({ id: 9, method: 'M.x', sessionId: undefined });
    expect((plain as { raw: Buffer }).raw.toString()).toBe(params);
    const s = clientCommand(buf(`{"id":9,"method":"M.x","params":${params},"sessionId":"AB:1"}`));
    expect(s).toMatchObject({ id: 9, sessionId: 'AB:1' });
    expect((s as { raw: Buffer }).raw.toString()).toBe(params);
  });

  it("Puppeteer's, id after the params, with and without a session", () => {
    const plain = clientCommand(buf(`{"method":"M.x","params":${params},"id":0}`));
    expect(plain).toMatchObject({ id: 0, method: 'M.x', sessionId: undefined });
    expect((plain as { raw: Buffer }).raw.toString()).toBe(params);
    const s = clientCommand(buf(`{"method":"M.x","params":${params},"id":4,"sessionId":"S"}`));
    expect(s).toMatchObject({ id: 4, sessionId: 'S' });
    expect((s as { raw: Buffer }).raw.toString()).toBe(params);
  });

  it('refuses any other shape with the id its head names', () => {
    const notLocated = (text: string) => reply(clientCommand(buf(text)));
    // Playwright's head but a tail that does not end the message
    expect(notLocated(`{"id":5,"method":"M","params":${params}} `)).toMatchObject({
      id: 5,
      error: { code: -32600, message: expect.stringContaining('compact JSON') as unknown },
    });
    expect(notLocated(`{"id":5,"method":"M","params":${params}]`).id).toBe(5);
    // Puppeteer's head without its id tail
    expect(notLocated(`{"method":"M","params":${params}}`)).toEqual({
      error: { code: -32600, message: expect.stringContaining('compact JSON') as unknown },
    });
    // neither head: whitespace, another field first
    expect(notLocated(`{ "id":5,"method":"M","params":${params}}`).id).toBeUndefined();
    expect(notLocated(`{"id":6,"x":1,"method":"M","params":${params}}`).id).toBe(6);
    expect(notLocated(`{"id":6}${big}`).id).toBe(6);
    expect(notLocated(`{"id":06,"x":1,"params":${params}}`).id).toBeUndefined();
    expect(notLocated(`{"id":9007199254740993,"x":1,"params":${params}}`).id).toBeUndefined();
  });

  it('refuses an id past the safe integers in either shape', () => {
    const huge = '9007199254740993';
    expect(reply(clientCommand(buf(`{"id":${huge},"method":"M","params":${params}}`)))).toEqual({
      error: { code: -32600, message: expect.stringContaining('compact JSON') as unknown },
    });
    expect(reply(clientCommand(buf(`{"method":"M","params":${params},"id":${huge}}`))).id).toBe(
      undefined,
    );
    expect(clientCommand(buf(`{"method":"M","params":${params},"id":9007199254740991}`))).toEqual(
      expect.objectContaining({ id: 9007199254740991 }),
    );
  });

  it('refuses the methods whose params the mux reads, naming them, with the id', () => {
    expect(INSPECTED.has('Target.attachToTarget')).toBe(true);
    for (const method of INSPECTED) {
      const r = reply(clientCommand(buf(`{"id":12,"method":"${method}","params":${params}}`)));
      expect(r).toEqual({
        id: 12,
        error: {
          code: -32602,
          message: `burrow: ${method} with params over ${CDP_MAX_DECODED_BYTES} bytes`,
        },
      });
    }
  });
});

describe('wholeObject', () => {
  const whole = (text: string) => wholeObject(buf(text));

  it('is true only for one object ending at the last byte', async () => {
    expect(await whole('{}')).toBe(true);
    expect(await whole('{"a":[1,{"b":"}"}],"c":"]"}')).toBe(true);
    expect(await whole('{')).toBe(false);
    expect(await whole('')).toBe(false);
    expect(await whole('[]')).toBe(false);
    expect(await whole(' {}')).toBe(false);
    expect(await whole('{} ')).toBe(false);
    // closes early: what follows would reach the top level
    expect(await whole('{"a":1},"sessionId":"X","b":{"c":2}')).toBe(false);
    expect(await whole('{"a":[}')).toBe(false);
    expect(await whole('{"a":]}')).toBe(false);
    expect(await whole('{"a":"unterminated}')).toBe(false);
  });

  it('skips strings, counting the backslashes before a quote', async () => {
    expect(await whole('{"a":"\\"}"}')).toBe(true); // an escaped quote, then a brace in the string
    expect(await whole('{"a":"\\\\"}')).toBe(true); // an escaped backslash: the quote closes
    expect(await whole('{"a":"\\\\"},"x":"}')).toBe(false);
    expect(await whole('{"a":"\\\\\\"}"}')).toBe(true); // three: the quote is escaped
    expect(await whole('{"a":"\\"}')).toBe(false); // the only closing quote is escaped
  });

  it('refuses nesting past a thousand levels, and allows a thousand', async () => {
    const nest = (n: number) => '{"a":'.repeat(n - 1) + '{' + '}'.repeat(n);
    expect(await whole(nest(1000))).toBe(true);
    expect(await whole(nest(1001))).toBe(false);
    expect(await whole('{"a":' + '['.repeat(999) + ']'.repeat(999) + '}')).toBe(true);
    expect(await whole('{"a":' + '['.repeat(1000) + ']'.repeat(1000) + '}')).toBe(false);
  });

  it('lets the event loop run during a long pass', async () => {
    const raw = buf(`{"e":"${'\\"'.repeat(4 * 1024 * 1024)}"}`);
    let turns = 0;
    let done = false;
    const tick = () => {
      if (done) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    const started = performance.now();
    expect(await wholeObject(raw)).toBe(true);
    done = true;
    const took = performance.now() - started;
    // one string of 4 Mi escaped quotes: the pass lets others run inside it, every few ms
    expect(turns).toBeGreaterThan(Math.min(3, took / 40));
    expect(turns).toBeLessThan(took / 2);
  });
});

describe('wireCommand', () => {
  it('writes the head and tail around the bytes that came', () => {
    const raw = buf('{"e":1}');
    expect(Buffer.concat(wireCommand(3, 'A.b', raw, undefined)).toString()).toBe(
      '{"id":3,"method":"A.b","params":{"e":1}}',
    );
    const pieces = wireCommand(3, 'A.b', raw, 'S"1');
    expect(pieces[1]).toBe(raw);
    expect(JSON.parse(Buffer.concat(pieces).toString())).toEqual({
      id: 3,
      method: 'A.b',
      params: { e: 1 },
      sessionId: 'S"1',
    });
    expect(NOT_ONE_OBJECT).toMatch(/not one JSON object/);
  });
});
