/**
 * The DevTools multiplexer (src/server/chromium/mux.ts) when the browser goes away, against a
 * scripted Chromium on an in-memory pipe (test/helpers/fake-chromium.ts): with commands of the
 * server and of a client still unanswered the server does not throw; a client whose browser
 * broke (a malformed message on the pipe) is closed with 1011 and why, one whose browser simply
 * ended with no reason; the server's connection is told once, however many times the mux is
 * closed. And what must not
 * break the pipe (which would stop the instance's browser): a mux with no hooks, replies and
 * events of an odd shape that a process in the instance may write, an event before the server
 * listens, a client not yet connected whose session ends. A client holding more than its bound
 * while its navigation is checked is closed and detached, and so is one whose commands wait for
 * Chromium past its inbound bound (1008).
 */
import { describe, expect, it } from 'vitest';
import {
  CDP_LOCATE_ABOVE_BYTES,
  CDP_MAX_DECODED_BYTES,
  CDP_MAX_QUEUED_BYTES,
} from '../../src/api/cdp-limits.js';
import type { Closing } from '../../src/server/chromium/mux-client.js';
import { CdpMux, type CdpMuxOptions } from '../../src/server/chromium/mux.js';
import { INBOUND_CLOSE, PIPE_FAILED } from '../../src/server/chromium/inbound.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const tick = () => new Promise((r) => setImmediate(r));

async function setup(opts: CdpMuxOptions = {}, connect = true) {
  const chromium = fakeChromium();
  const mux = new CdpMux(chromium.pipe, opts);
  let rootCloses = 0;
  mux.root.listen({ message: () => {}, close: () => void rootCloses++ });
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget');
  chromium.write({ id: attach.id, result: { sessionId: 'SA' } });
  const handle = await opening;
  /** Each close of the client's peer, with its reason (undefined: none). */
  const closes: (Closing | undefined)[] = [];
  const received: Record<string, unknown>[] = [];
  const peer = {
    send: (d: Buffer) => void received.push(JSON.parse(d.toString()) as Record<string, unknown>),
    close: (why?: Closing) => void closes.push(why),
  };
  if (connect) handle.connect(peer);
  const send = (msg: unknown) => handle.receive(Buffer.from(JSON.stringify(msg)));
  return {
    chromium,
    mux,
    handle,
    send,
    closes,
    received,
    connect: () => handle.connect(peer),
    rootCloses: () => rootCloses,
  };
}

describe('the browser going away', () => {
  it("with the server's and a client's commands unanswered: nothing throws, the client is closed", async () => {
    const { chromium, mux, send, closes, rootCloses } = await setup();
    const n = chromium.commands.length;
    send({ id: 1, method: 'Runtime.evaluate', params: { expression: 'new Promise(() => {})' } });
    mux.root.send({ id: 7, method: 'Browser.getWindowForTarget', params: {} });
    await chromium.next('Runtime.evaluate', n);
    await chromium.next('Browser.getWindowForTarget', n);
    expect(() => mux.close()).not.toThrow();
    expect(closes.length).toBeGreaterThan(0);
    expect(closes[0]).toBeUndefined();
    expect(rootCloses()).toBe(1);
    expect(() => mux.close()).not.toThrow();
    expect(rootCloses()).toBe(1);
  });

  it('broken by a malformed message: its clients are closed with 1011 and why', async () => {
    const { chromium, mux, closes, rootCloses } = await setup();
    // a second client, not connected yet, is closed as well (told when it connects)
    const opening = mux.open({ type: 'browser' });
    const attach = await chromium.next('Target.attachToBrowserTarget', 1);
    chromium.write({ id: attach.id, result: { sessionId: 'SB' } });
    const unconnected = await opening;
    chromium.write('not a DevTools message');
    await tick();
    expect(mux.root.isOpen).toBe(false);
    expect(closes[0]).toEqual(PIPE_FAILED);
    expect(PIPE_FAILED.code).toBe(1011);
    expect(rootCloses()).toBe(1);
    let told = 0;
    unconnected.connect({ send: () => {}, close: () => void told++ });
    expect(told).toBe(1);
  });
});

describe('what does not break the pipe', () => {
  it('a mux with no hooks: activation and a new context reach the client', async () => {
    const { chromium, send, received } = await setup();
    const n = chromium.commands.length;
    send({ id: 1, method: 'Target.activateTarget', params: { targetId: 'T1' } });
    send({ id: 2, method: 'Target.createBrowserContext', params: {} });
    const activate = await chromium.next('Target.activateTarget', n);
    const create = await chromium.next('Target.createBrowserContext', n);
    chromium.write({ id: activate.id, result: {}, sessionId: 'SA' });
    chromium.write({ id: create.id, result: { browserContextId: 'C1' }, sessionId: 'SA' });
    await tick();
    expect(chromium.pipe.isOpen).toBe(true);
    expect(received).toEqual([
      { id: 1, result: {} },
      { id: 2, result: { browserContextId: 'C1' } },
    ]);
  });

  it('replies without a result or with a null one, and ownership events without params', async () => {
    const contexts: string[] = [];
    const { chromium, send, received } = await setup({
      onContextCreated: (id) => void contexts.push(id),
    });
    const n = chromium.commands.length;
    for (const id of [1, 3]) {
      send({ id, method: 'Target.attachToTarget', params: { targetId: 'T1', flatten: true } });
      send({ id: id + 1, method: 'Target.createBrowserContext', params: {} });
    }
    await tick();
    const sent = chromium.commands.slice(n);
    const [attach, create, attach2, create2] = sent;
    chromium.write(`{"id":${attach!.id},"sessionId":"SA"}`);
    chromium.write(`{"id":${create!.id},"sessionId":"SA"}`);
    chromium.write(`{"id":${attach2!.id},"result":null,"sessionId":"SA"}`);
    chromium.write(`{"id":${create2!.id},"result":null,"sessionId":"SA"}`);
    chromium.write('{"method":"Target.attachedToTarget","sessionId":"SA"}');
    chromium.write('{"method":"Target.detachedFromTarget"}');
    await tick();
    expect(sent.map((c) => c.method)).toEqual([
      'Target.attachToTarget',
      'Target.createBrowserContext',
      'Target.attachToTarget',
      'Target.createBrowserContext',
    ]);
    expect(chromium.pipe.isOpen).toBe(true);
    expect(received.slice(0, 4)).toEqual([
      { id: 1 },
      { id: 2 },
      { id: 3, result: null },
      { id: 4, result: null },
    ]);
    expect(contexts).toEqual([]);
  });

  it('an event before the server listens', async () => {
    const chromium = fakeChromium();
    new CdpMux(chromium.pipe);
    chromium.write({ method: 'Target.targetCreated', params: { targetInfo: {} } });
    await tick();
    expect(chromium.pipe.isOpen).toBe(true);
  });

  it('the session of a client not yet connected ending: it is closed when it connects', async () => {
    const { chromium, closes, connect } = await setup({}, false);
    chromium.write({ method: 'Target.detachedFromTarget', params: { sessionId: 'SA' } });
    await tick();
    expect(chromium.pipe.isOpen).toBe(true);
    connect();
    expect(closes).toHaveLength(1);
  });
});

describe('a client holding past its bound while its navigation is checked', () => {
  it('is closed and its session detached', async () => {
    const { chromium, send, closes } = await setup({
      checkNavigation: () => new Promise(() => {}),
    });
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'PA', targetInfo: { targetId: 'TA', type: 'page' } },
      sessionId: 'SA',
    });
    await tick();
    const n = chromium.commands.length;
    send({ id: 1, method: 'Page.navigate', params: { url: 'http://a.test/' }, sessionId: 'PA' });
    send({ id: 2, method: 'Runtime.evaluate', params: { expression: '1' }, sessionId: 'PA' });
    expect(closes).toEqual([]);
    const big = 'x'.repeat(CDP_MAX_QUEUED_BYTES);
    send({ id: 3, method: 'Runtime.evaluate', params: { expression: big }, sessionId: 'PA' });
    const detach = await chromium.next('Target.detachFromTarget', n);
    expect(detach.params).toEqual({ sessionId: 'SA' });
    expect(closes.length).toBeGreaterThan(0);
    expect(chromium.commands.slice(n).map((c) => c.method)).toEqual(['Target.detachFromTarget']);
  });
});

describe('what a client is owed', () => {
  it('a reply too large for the mux to decode reaches it whole; the pipe stays open', async () => {
    const { chromium, send, received } = await setup();
    const n = chromium.commands.length;
    send({ id: 5, method: 'Page.captureScreenshot', params: {} });
    const cmd = await chromium.next('Page.captureScreenshot', n);
    const data = 'A'.repeat(CDP_MAX_DECODED_BYTES * 2);
    chromium.write(`{"id":${cmd.id},"result":{"data":"${data}"},"sessionId":"SA"}`);
    await tick();
    expect(chromium.pipe.isOpen).toBe(true);
    expect(received).toHaveLength(1);
    expect((received[0]!.result as { data: string }).data.length).toBe(data.length);
  });

  it('a large command of a client that left while it was checked does not go out', async () => {
    const { chromium, handle } = await setup();
    const n = chromium.commands.length;
    const pad = 'x'.repeat(CDP_MAX_DECODED_BYTES + 10);
    handle.receive(Buffer.from(`{"id":1,"method":"Runtime.evaluate","params":{"a":"${pad}"}}`));
    handle.close();
    for (let i = 0; i < 20; i++) await tick();
    expect(chromium.commands.slice(n).map((c) => c.method)).toEqual(['Target.detachFromTarget']);
  });

  it('a trap whose page cannot be attached sets nothing; the navigation goes', async () => {
    const { chromium, send } = await setup({
      checkNavigation: async () => ({ reason: 'AddressUnreachable' }),
    });
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'PA', targetInfo: { targetId: 'TA', type: 'page' } },
      sessionId: 'SA',
    });
    await tick();
    const n = chromium.commands.length;
    send({ id: 1, method: 'Page.navigate', params: { url: 'http://d.test/' }, sessionId: 'PA' });
    const attach = await chromium.next('Target.attachToTarget', n);
    chromium.write({ id: attach.id, error: { code: -32602, message: 'No target with given id' } });
    const navigate = await chromium.next('Page.navigate', n);
    expect(navigate.sessionId).toBe('PA');
    expect(chromium.commands.slice(n).map((c) => c.method)).toEqual([
      'Target.attachToTarget',
      'Page.navigate',
    ]);
  });
});

describe('a trap that cannot intercept', () => {
  it('is removed before the navigation goes', async () => {
    const { chromium, send } = await setup({
      checkNavigation: async () => ({ reason: 'AddressUnreachable' }),
    });
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'PA', targetInfo: { targetId: 'TA', type: 'page' } },
      sessionId: 'SA',
    });
    await tick();
    const n = chromium.commands.length;
    send({ id: 1, method: 'Page.navigate', params: { url: 'http://d.test/' }, sessionId: 'PA' });
    const attach = await chromium.next('Target.attachToTarget', n);
    chromium.write({ id: attach.id, result: { sessionId: 'TRAP' } });
    const enable = await chromium.next('Fetch.enable', n);
    chromium.write({ id: enable.id, error: { code: -32000, message: 'Fetch is not available' } });
    await chromium.next('Page.navigate', n);
    const sent = chromium.commands.slice(n);
    expect(sent.map((c) => [c.method, c.sessionId])).toEqual([
      ['Target.attachToTarget', undefined],
      ['Fetch.enable', 'TRAP'],
      ['Target.detachFromTarget', undefined],
      ['Page.navigate', 'PA'],
    ]);
    expect(sent[2]!.params).toEqual({ sessionId: 'TRAP' });
  });
});

describe('a client sending faster than the browser reads', () => {
  it('past its bound is closed with 1008 and its session detached', async () => {
    const { chromium, handle, closes } = await setup();
    const n = chromium.commands.length;
    // commands the mux decodes (under CDP_LOCATE_ABOVE_BYTES), so each goes to the gate at once
    const pad = 'a'.repeat(CDP_LOCATE_ABOVE_BYTES - 100);
    let id = 0;
    // Chromium answers no barrier meanwhile: the commands wait
    while (closes.length === 0 && id < 4000) {
      handle.receive(
        Buffer.from(`{"id":${++id},"method":"Target.getTargets","params":{"x":"${pad}"}}`),
      );
    }
    expect(closes[0]).toEqual(INBOUND_CLOSE);
    expect(INBOUND_CLOSE.code).toBe(1008);
    const detached = () =>
      chromium.commands.slice(n).find((c) => c.method === 'Target.detachFromTarget');
    for (let round = 0; round < 50 && !detached(); round++) {
      for (const c of chromium.commands.slice(n)) {
        if (c.method === 'Browser.getVersion' && !c.params.answered) {
          c.params.answered = true;
          chromium.write({ id: c.id, result: {} });
        }
      }
      await tick();
    }
    expect(detached()?.params).toEqual({ sessionId: 'SA' });
  }, 30_000);
});
