/**
 * Bounds on the byte streams the server reads from instances and clients (issue 18, item 4):
 * the toolbox's frames (src/server/toolbox/frames.ts), newline-delimited lines
 * (src/internal/lines.ts: the kernel bridge, Chromium's stderr), the DevTools pipe and its
 * multiplexer (src/server/chromium/pipe.ts, mux.ts). Each refuses what passes its bound as soon
 * as the bound is passed, without holding more.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_CONTAINERS } from '../../src/internal/json-bounded.js';
import { LineDecoder, LineTooLong } from '../../src/internal/lines.js';
import { CdpConnection } from '../../src/server/chromium/cdp.js';
import {
  CDP_MAX_COMMAND_WIRE_BYTES,
  CDP_MAX_DECODED_BYTES as MAX_DECODED_BYTES,
  CDP_MAX_ROOT_EVENT_BYTES as MAX_ROOT_EVENT_BYTES,
  CDP_MAX_ROOT_REPLY_BYTES as MAX_ROOT_REPLY_BYTES,
} from '../../src/api/cdp-limits.js';
import { CdpMux, MAX_IN_FLIGHT } from '../../src/server/chromium/mux.js';
import { CdpPipe } from '../../src/server/chromium/pipe.js';
import { parseNotebook } from '../../src/server/ubuntu/kernels/nbformat.js';
import {
  FrameDecoder,
  FrameError,
  MAX_HEADER_BYTES,
  MAX_PAYLOAD_BYTES,
} from '../../src/server/toolbox/frames.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const MiB = 1024 * 1024;
const tick = () => new Promise((r) => setImmediate(r));

/** A frame header declaring `fields`, as its 4-byte length and JSON. */
function header(fields: Record<string, unknown>): Buffer {
  const json = Buffer.from(JSON.stringify(fields));
  const len = Buffer.alloc(4);
  len.writeUInt32BE(json.length);
  return Buffer.concat([len, json]);
}

describe('toolbox frame bounds', () => {
  it('refuses a declared payload past the bound before holding any of it', () => {
    const decoder = new FrameDecoder();
    expect(() => decoder.push(header({ id: 1, payload_bytes: 2 ** 40 }))).toThrow(FrameError);
    const big = new FrameDecoder();
    expect(() => big.push(header({ id: 1, payload_bytes: MAX_PAYLOAD_BYTES + 1 }))).toThrow(
      /payload of \d+ bytes/,
    );
    // at the bound it is a frame like any other
    const ok = new FrameDecoder();
    expect(ok.push(header({ id: 1, payload_bytes: MAX_PAYLOAD_BYTES }))).toEqual([]);
  });

  it('refuses a payload size that is not a byte count, and a header past its bound', () => {
    for (const payload_bytes of [-1, 1.5, '10', null, 2 ** 53]) {
      expect(() => new FrameDecoder().push(header({ id: 1, payload_bytes }))).toThrow(FrameError);
    }
    const len = Buffer.alloc(4);
    len.writeUInt32BE(MAX_HEADER_BYTES + 1);
    expect(() => new FrameDecoder().push(len)).toThrow(/header of/);
    expect(MAX_HEADER_BYTES).toBeLessThanOrEqual(16 * MiB);
    const garbage = Buffer.concat([Buffer.from([0, 0, 0, 3]), Buffer.from('{x}')]);
    expect(() => new FrameDecoder().push(garbage)).toThrow(FrameError);
  });
});

describe('bounded lines', () => {
  it('splits lines cut anywhere and throws once a line passes the bound', () => {
    const lines = new LineDecoder({ maxBytes: 8 });
    expect(lines.push(Buffer.from('ab'))).toEqual([]);
    expect(lines.push(Buffer.from('c\nde\n12345'))).toEqual(['abc', 'de']);
    expect(lines.push(Buffer.from('678\n'))).toEqual(['12345678']);
    expect(() => lines.push(Buffer.from('123456789'))).toThrow(LineTooLong);
    // never held: a stream with no newline at all is refused at the bound
    const flood = new LineDecoder({ maxBytes: MiB });
    let fed = 0;
    expect(() => {
      for (; fed < 64 * MiB; fed += 64 * 1024) flood.push(Buffer.alloc(64 * 1024, 0x61));
    }).toThrow(LineTooLong);
    expect(fed).toBeLessThanOrEqual(MiB);
  });

  it('in truncate mode keeps the head of a long line and drops the rest', () => {
    const lines = new LineDecoder({ maxBytes: 4, overflow: 'truncate' });
    expect(lines.push(Buffer.from('abcdefg'))).toEqual(['abcd']);
    expect(lines.push(Buffer.from('hij\nxy\n'))).toEqual(['xy']);
    expect(lines.push(Buffer.from('123456\nz\n'))).toEqual(['1234', 'z']);
  });
});

describe('DevTools pipe bounds', () => {
  it('fails a pipe whose message passes the bound, holding no more than the bound', () => {
    const fromChromium = new PassThrough();
    const pipe = new CdpPipe(new PassThrough(), fromChromium, MiB);
    let closed = false;
    pipe.listen({ message: () => {}, close: () => (closed = true) });
    let fed = 0;
    // written straight to the reader's listener, as a flood from a copied descriptor would be
    while (pipe.isOpen && fed < 64 * MiB) {
      fromChromium.emit('data', Buffer.alloc(256 * 1024, 0x7b));
      fed += 256 * 1024;
    }
    expect(pipe.isOpen).toBe(false);
    expect(closed).toBe(true);
    expect(fed).toBeLessThanOrEqual(MiB + 256 * 1024);
    expect(pipe.failure).toMatch(/longer than 1048576 bytes/);
  });

  it('fails the pipe, not the server, on messages that are not CDP', async () => {
    for (const garbage of [
      'not json',
      '[1,2]',
      // (an event nobody listens to is not decoded at all, broken or not)
      '{"method":"Target.targetCreated","params":{broken}}',
      '{"method":"Target.attachedToTarget",broken}}',
      '{"method":"Target.targetCreated","params":{}}', // the server's own handler trips on it
    ]) {
      const chromium = fakeChromium();
      const mux = new CdpMux(chromium.pipe);
      const server = new CdpConnection(mux.root);
      server.on('Target.targetCreated', (p) => {
        (p.targetInfo as { targetId: string }).targetId.toString();
      });
      chromium.write(garbage);
      await server.closed;
      expect(chromium.pipe.failure, garbage).toMatch(/malformed DevTools message/);
    }
  });

  // A process of the instance that writes into the pipe (or a Chromium it took over) chooses the
  // shape: JSON of nested arrays takes many times its length once decoded, so the server decodes
  // only small messages; it passes larger ones on undecoded or drops them.
  it('decodes nothing large: events for the server dropped, replies to it refused, odd shapes failed', async () => {
    const nested = (bytes: number) => `[${'[],'.repeat(Math.floor(bytes / 3))}[]]`;
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const server = new CdpConnection(mux.root);
    const heard: string[] = [];
    server.on('Page.frameNavigated', () => heard.push('small'));
    server.on('Page.huge', () => heard.push('huge'));
    chromium.write(`{"method":"Page.huge","params":{"a":${nested(MAX_ROOT_EVENT_BYTES + MiB)}}}`);
    chromium.write({ method: 'Page.frameNavigated', params: {} });
    const asked = server.send('Page.captureScreenshot');
    const command = await chromium.next('Page.captureScreenshot');
    const data = 'A'.repeat(MAX_ROOT_REPLY_BYTES + MiB);
    chromium.write(`{"id":${command.id},"result":{"data":"${data}"}}`);
    await expect(asked).rejects.toThrow(/a reply of \d+ bytes \(the server reads at most/);
    expect(heard).toEqual(['small']);
    expect(chromium.pipe.isOpen).toBe(true);
    // a shape the router does not know, or an ownership change, is decoded only when small
    for (const odd of [
      ` {"method":"Page.x","params":${nested(MAX_DECODED_BYTES + 1024)}}`,
      `{"method":"Target.attachedToTarget","params":{"x":${nested(MAX_DECODED_BYTES + 1024)}}}`,
    ]) {
      const c = fakeChromium();
      const m = new CdpMux(c.pipe);
      const s = new CdpConnection(m.root);
      c.write(odd);
      await s.closed;
      expect(c.pipe.failure).toMatch(/bytes to decode \(at most 1048576\)/);
    }
  });

  it('decodes for the server only what someone waits for, and never millions of objects', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const server = new CdpConnection(mux.root);
    const heard: number[] = [];
    server.on('Page.frameNavigated', (p) => heard.push((p.items as unknown[]).length));
    // an event nobody listens to, of any cost, and a reply to nothing: not decoded
    const bomb = `[${'{},'.repeat(MAX_JSON_CONTAINERS)}{}]`;
    const t = performance.now();
    for (let i = 0; i < 20; i++) {
      chromium.write(`{"method":"Burrow.bomb","params":{"a":${bomb}}}`);
      chromium.write(`{"id":424242,"result":{"a":${bomb}}}`);
    }
    // one listened to, past the cost bound: dropped; a reply too costly: the command fails
    chromium.write(`{"method":"Page.frameNavigated","params":{"items":${bomb}}}`);
    chromium.write({ method: 'Page.frameNavigated', params: { items: [{}, {}] } });
    const asked = server.send('Storage.getCookies');
    const command = await chromium.next('Storage.getCookies');
    const huge = `[${'{},'.repeat(1_000_000)}{}]`;
    chromium.write(`{"id":${command.id},"result":{"cookies":${huge}}}`);
    await expect(asked).rejects.toThrow(/reply not decoded: more than 1000000 objects/);
    expect(heard).toEqual([2]);
    expect(chromium.pipe.isOpen).toBe(true);
    // counting stops at the bound: far cheaper than decoding
    expect(performance.now() - t).toBeLessThan(10_000);
  });

  it('refuses to write a command Chromium would not read, answering the client', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const opening = mux.open({ type: 'browser' });
    const attach = await chromium.next('Target.attachToBrowserTarget');
    chromium.write({ id: attach.id, result: { sessionId: 'S' } });
    const client = await opening;
    const received: { id?: number; error?: { message: string } }[] = [];
    client.connect({ send: (d) => received.push(JSON.parse(d.toString())), close: () => {} });
    const n = chromium.commands.length;
    const expression = 'x'.repeat(CDP_MAX_COMMAND_WIRE_BYTES);
    client.receive(
      Buffer.from(JSON.stringify({ id: 7, method: 'Runtime.evaluate', params: { expression } })),
    );
    // its params are checked in the main thread's shared slices (internal/cpu-share.ts)
    for (let turns = 0; turns < 20 && received.length === 0; turns++) await tick();
    expect(chromium.commands.length).toBe(n);
    expect(received).toEqual([{ id: 7, error: { code: -32000, message: expect.any(String) } }]);
    expect(chromium.pipe.isOpen).toBe(true);
  });

  it('caps the commands one client has awaiting replies', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const opening = mux.open({ type: 'browser' });
    const attach = await chromium.next('Target.attachToBrowserTarget');
    chromium.write({ id: attach.id, result: { sessionId: 'S' } });
    const client = await opening;
    const errors: number[] = [];
    client.connect({
      send: (d) => errors.push((JSON.parse(d.toString()) as { id: number }).id),
      close: () => {},
    });
    for (let id = 1; id <= MAX_IN_FLIGHT + 2; id++) {
      client.receive(Buffer.from(`{"id":${id},"method":"Runtime.evaluate","params":{}}`));
    }
    expect(errors).toEqual([MAX_IN_FLIGHT + 1, MAX_IN_FLIGHT + 2]);
    // an answer frees a place
    await tick();
    const first = chromium.commands.find((c) => c.method === 'Runtime.evaluate')!;
    chromium.write(`{"id":${first.id},"result":{},"sessionId":"S"}`);
    await tick();
    client.receive(Buffer.from(`{"id":99999,"method":"Runtime.evaluate","params":{}}`));
    await tick();
    expect(errors).toEqual([MAX_IN_FLIGHT + 1, MAX_IN_FLIGHT + 2, 1]);
    expect(chromium.commands.at(-1)).toMatchObject({ method: 'Runtime.evaluate' });
  });
});

describe('JSON read from an instance', () => {
  it('a notebook file nested or filled past what is cheap to decode is refused, not walked', () => {
    const cell = (outputs: string) =>
      `{"cells":[{"cell_type":"code","id":"a","metadata":{},"source":"","execution_count":null,"outputs":[${outputs}]}],"metadata":{},"nbformat":4,"nbformat_minor":5}`;
    expect(() => parseNotebook(cell(''))).not.toThrow();
    const deep = `{"output_type":"display_data","metadata":{},"data":{"application/json":${'['.repeat(300)}${']'.repeat(300)}}}`;
    expect(() => parseNotebook(cell(deep))).toThrow(/nested deeper than 256 levels/);
    const wide = `{"output_type":"display_data","metadata":{},"data":{"application/json":[${'{},'.repeat(50_000)}{}]}}`;
    expect(() => parseNotebook(cell(wide))).toThrow(/more than 50000 objects and arrays/);
  });
});
