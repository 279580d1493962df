/**
 * The DevTools multiplexer (src/server/chromium/mux.ts) against a scripted "Chromium" on the
 * other end of a CdpPipe made of in-memory streams: wire ids, routing of replies and events,
 * session ownership, and messages of unusual shape.
 */
import { describe, expect, it } from 'vitest';
import { CdpConnection } from '../../src/server/chromium/cdp.js';
import { CdpMux, type MuxClient } from '../../src/server/chromium/mux.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

/** A mux client that records what it is sent. */
async function client(mux: CdpMux, chromium: ReturnType<typeof fakeChromium>, session: string) {
  const after = chromium.commands.length;
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget', after);
  chromium.write({ id: attach.id, result: { sessionId: session } });
  const handle: MuxClient = await opening;
  const received: Record<string, unknown>[] = [];
  let closed = false;
  handle.connect({
    send: (data) => received.push(JSON.parse(data.toString()) as Record<string, unknown>),
    close: () => (closed = true),
  });
  const send = (msg: Record<string, unknown>) => handle.receive(Buffer.from(JSON.stringify(msg)));
  return { handle, received, send, closed: () => closed };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('CdpMux', () => {
  it('gives every command its own wire id and routes each reply back with the sender id', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const a = await client(mux, chromium, 'SA');
    const b = await client(mux, chromium, 'SB');
    const n = chromium.commands.length;
    a.send({ id: 1, method: 'Browser.getVersion' });
    b.send({ id: 1, method: 'Browser.getVersion' });
    await tick();
    const [wa, wb] = chromium.commands.slice(n);
    expect(wa).toMatchObject({ method: 'Browser.getVersion', sessionId: 'SA' });
    expect(wb).toMatchObject({ method: 'Browser.getVersion', sessionId: 'SB' });
    expect(wa!.id).not.toBe(wb!.id);
    // Chromium's own layout: id first, sessionId appended last
    chromium.write(`{"id":${wb!.id},"result":{"product":"b"},"sessionId":"SB"}`);
    chromium.write(`{"id":${wa!.id},"result":{"product":"a"},"sessionId":"SA"}`);
    await tick();
    expect(a.received).toEqual([{ id: 1, result: { product: 'a' } }]);
    expect(b.received).toEqual([{ id: 1, result: { product: 'b' } }]);
  });

  it('routes events by session: own session without sessionId, owned ones as they are', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const server = new CdpConnection(mux.root);
    const rootEvents: string[] = [];
    server.on('Target.targetCreated', () => rootEvents.push('targetCreated'));
    server.on('Page.loadEventFired', (_p, sid) => rootEvents.push(`load ${sid}`));
    const a = await client(mux, chromium, 'SA');
    const b = await client(mux, chromium, 'SB');

    const attached = {
      method: 'Target.attachedToTarget',
      params: { sessionId: 'PA', targetInfo: { targetId: 'T1', type: 'page' } },
      sessionId: 'SA',
    };
    chromium.write(attached);
    chromium.write({ method: 'Page.loadEventFired', params: { timestamp: 1 }, sessionId: 'PA' });
    chromium.write({ method: 'Page.loadEventFired', params: { timestamp: 2 }, sessionId: 'PX' });
    chromium.write({ method: 'Target.targetCreated', params: { targetInfo: { targetId: 'T2' } } });
    await tick();
    expect(a.received).toEqual([
      { method: 'Target.attachedToTarget', params: attached.params },
      { method: 'Page.loadEventFired', params: { timestamp: 1 }, sessionId: 'PA' },
    ]);
    expect(b.received).toEqual([]);
    expect(rootEvents).toEqual(['load PX', 'targetCreated']); // not a client's: the server's

    // a owns PA; b may not use it
    b.send({ id: 7, method: 'Runtime.evaluate', params: { expression: '1' }, sessionId: 'PA' });
    expect(b.received).toEqual([
      { id: 7, error: { code: -32001, message: 'Session with given id not found.' } },
    ]);
    const n = chromium.commands.length;
    a.send({ id: 7, method: 'Runtime.evaluate', params: { expression: '1' }, sessionId: 'PA' });
    await tick();
    expect(chromium.commands.slice(n)).toMatchObject([
      { method: 'Runtime.evaluate', sessionId: 'PA' },
    ]);

    // detached: PA is nobody's any more
    chromium.write({
      method: 'Target.detachedFromTarget',
      params: { sessionId: 'PA', targetId: 'T1' },
      sessionId: 'SA',
    });
    await tick();
    a.send({ id: 8, method: 'Runtime.evaluate', params: { expression: '1' }, sessionId: 'PA' });
    expect(a.received.at(-1)).toMatchObject({ id: 8, error: { code: -32001 } });
  });

  it('adopts the session answered to a client attachToTarget and reports bringToFront', async () => {
    const chromium = fakeChromium();
    const activated: string[] = [];
    const mux = new CdpMux(chromium.pipe, { onActivate: (t) => activated.push(t) });
    const a = await client(mux, chromium, 'SA');
    a.send({ id: 1, method: 'Target.attachToTarget', params: { targetId: 'T9', flatten: true } });
    const attach = await chromium.next('Target.attachToTarget');
    chromium.write(`{"id":${attach.id},"result":{"sessionId":"P9"},"sessionId":"SA"}`);
    await tick();
    expect(a.received).toEqual([{ id: 1, result: { sessionId: 'P9' } }]);
    const n = chromium.commands.length;
    a.send({ id: 2, method: 'Page.bringToFront', sessionId: 'P9' });
    const front = await chromium.next('Page.bringToFront', n);
    chromium.write(`{"id":${front.id},"result":{},"sessionId":"P9"}`);
    a.send({ id: 3, method: 'Target.activateTarget', params: { targetId: 'T4' } });
    const activate = await chromium.next('Target.activateTarget', n);
    chromium.write(
      `{"id":${activate.id},"error":{"code":-32000,"message":"No target"},"sessionId":"SA"}`,
    );
    await tick();
    expect(a.received.slice(1)).toEqual([
      { id: 2, result: {}, sessionId: 'P9' },
      { id: 3, error: { code: -32000, message: 'No target' } },
    ]);
    expect(activated).toEqual(['T9']); // the failed activation does not count
  });

  it('handles messages of another shape by parsing them', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const a = await client(mux, chromium, 'SA');
    a.send({ id: 5, method: 'Browser.getVersion' });
    const cmd = await chromium.next('Browser.getVersion');
    // sessionId first, id last, whitespace: still routed, renumbered and cut
    chromium.write(
      `{ "sessionId": "SA", "result": {"x": "}\\"sessionId\\":\\"SB\\"}"}, "id": ${cmd.id} }`,
    );
    chromium.write({ params: { y: 1 }, sessionId: 'SA', method: 'Custom.event' });
    await tick();
    expect(a.received).toEqual([
      { id: 5, result: { x: '}"sessionId":"SB"}' } },
      { method: 'Custom.event', params: { y: 1 } },
    ]);
  });

  it('rejects malformed commands without sending them', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const a = await client(mux, chromium, 'SA');
    const n = chromium.commands.length;
    a.handle.receive(Buffer.from('{not json'));
    a.send({ method: 'Browser.getVersion' });
    a.send({ id: 1 });
    a.send({ id: 2, method: 'Browser.getVersion', params: [1] });
    await tick();
    expect(chromium.commands.length).toBe(n);
    expect(a.received.map((m) => [m.id, (m.error as { code: number }).code])).toEqual([
      [undefined, -32700],
      [undefined, -32600],
      [1, -32600],
      [2, -32602],
    ]);
  });

  it('a departing client is detached, and its late events reach nobody', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const server = new CdpConnection(mux.root);
    const seen: string[] = [];
    server.on('Page.frameNavigated', (_p, sid) => seen.push(String(sid)));
    const a = await client(mux, chromium, 'SA');
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'PA', targetInfo: { targetId: 'T1' } },
      sessionId: 'SA',
    });
    await tick();
    const n = chromium.commands.length;
    a.handle.close();
    const detach = await chromium.next('Target.detachFromTarget', n);
    expect(detach).toMatchObject({ params: { sessionId: 'SA' } });
    expect(detach.sessionId).toBeUndefined();
    chromium.write({ method: 'Page.frameNavigated', params: {}, sessionId: 'PA' });
    chromium.write({ id: detach.id, result: {} });
    chromium.write({ method: 'Page.frameNavigated', params: {}, sessionId: 'QQ' });
    await tick();
    expect(seen).toEqual(['QQ']);
  });

  it('closes a client whose session Chromium detached, and every client with the pipe', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const server = new CdpConnection(mux.root);
    const a = await client(mux, chromium, 'SA');
    const b = await client(mux, chromium, 'SB');
    chromium.write({ method: 'Target.detachedFromTarget', params: { sessionId: 'SA' } });
    await tick();
    expect([a.closed(), b.closed()]).toEqual([true, false]);
    chromium.pipe.close();
    await server.closed;
    expect(b.closed()).toBe(true);
    await expect(mux.open({ type: 'browser' })).rejects.toThrow('the browser is gone');
  });
});
