/**
 * The DevTools multiplexer's guards, against a scripted Chromium on an in-memory pipe (see
 * cdp-mux.test.ts for the routing basics): what a client may not do (another's session, commands
 * of the wrong shape, each answered as Chromium answers them), what it is owed (its replies byte
 * for byte, only its own events, the hooks told only of what succeeded), and the lifecycle (a
 * client that never connects, departs, or whose page closes; the browser going away).
 */
import { describe, expect, it } from 'vitest';
import { CdpConnection } from '../../src/server/chromium/cdp.js';
import { CdpMux, type CdpMuxOptions, type MuxClient } from '../../src/server/chromium/mux.js';
import { fakeChromium, type Wire } from '../helpers/fake-chromium.js';

const tick = () => new Promise((r) => setImmediate(r));

function setup(opts: CdpMuxOptions = {}) {
  const chromium = fakeChromium();
  const mux = new CdpMux(chromium.pipe, opts);
  const rootMessages: string[] = [];
  let rootClosed = false;
  mux.root.listen({ message: (m) => rootMessages.push(m), close: () => (rootClosed = true) });

  /** A client attached as `session`; connected unless `connect` is false. */
  async function client(session: string, target = { type: 'browser' } as const, connect = true) {
    const after = chromium.commands.length;
    const opening = mux.open(target);
    const attach = await chromium.next(
      target.type === 'browser' ? 'Target.attachToBrowserTarget' : 'Target.attachToTarget',
      after,
    );
    chromium.write({ id: attach.id, result: { sessionId: session } });
    const handle: MuxClient = await opening;
    const raw: Buffer[] = [];
    let closed = 0;
    const peer = { send: (d: Buffer) => raw.push(d), close: () => void closed++ };
    if (connect) handle.connect(peer);
    const send = (msg: unknown) =>
      handle.receive(Buffer.from(typeof msg === 'string' ? msg : JSON.stringify(msg)));
    return {
      handle,
      raw,
      received: () => raw.map((d) => JSON.parse(d.toString()) as Record<string, unknown>),
      send,
      closed: () => closed,
      connect: () => handle.connect(peer),
    };
  }

  /** The command the mux wrote for `method` after index `after`. */
  const next = (method: string, after = 0): Promise<Wire> => chromium.next(method, after);
  return { chromium, mux, client, next, rootMessages, rootClosed: () => rootClosed };
}

describe('replies and events reach their client unchanged', () => {
  it('byte for byte but the id and its own sessionId, whatever the numbers and escapes', async () => {
    const { chromium, client, next } = setup();
    const a = await client('SA');
    const n = chromium.commands.length;
    a.send({ id: 41, method: 'Runtime.evaluate', params: { expression: '1' } });
    const cmd = await next('Runtime.evaluate', n);
    const body =
      '"result":{"n":12345678901234567890123,"s":"\\u00e9\\/\\"x\\"","f":1.50,"k":{"b":1,"a":2}}';
    chromium.write(`{"id":${cmd.id},${body},"sessionId":"SA"}`);
    const event =
      '{"method":"Runtime.consoleAPICalled","params":{"v":1e400,"t":"\\u2028"},"sessionId":"SA"}';
    chromium.write(event);
    await tick();
    expect(a.raw.map(String)).toEqual([
      `{"id":41,${body}}`,
      '{"method":"Runtime.consoleAPICalled","params":{"v":1e400,"t":"\\u2028"}}',
    ]);
  });

  it("a reply of the server's own connection goes to it with the server's id", async () => {
    const { chromium, mux, next, rootMessages } = setup();
    expect(mux.root.isOpen).toBe(true);
    mux.root.send({ id: 77, method: 'Browser.getVersion', params: {} });
    const cmd = await next('Browser.getVersion');
    expect(cmd.sessionId).toBeUndefined();
    chromium.write(`{"id":${cmd.id},"result":{"product":"x"}}`);
    mux.root.send({ id: 78, method: 'Page.enable', params: {}, sessionId: 'SRV' });
    const onSession = await next('Page.enable');
    expect(onSession.sessionId).toBe('SRV');
    chromium.write(`{"id":${onSession.id},"result":{},"sessionId":"SRV"}`);
    await tick();
    expect(rootMessages).toEqual([
      '{"id":77,"result":{"product":"x"}}',
      '{"id":78,"result":{},"sessionId":"SRV"}',
    ]);
  });

  it('events of no client, or of no session, go to the server as they are', async () => {
    const { chromium, client, rootMessages } = setup();
    const a = await client('SA');
    const sessionless =
      '{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"T"}}}';
    const other = '{"method":"Page.loadEventFired","params":{},"sessionId":"NOBODY"}';
    chromium.write(sessionless);
    chromium.write(other);
    await tick();
    expect(rootMessages).toEqual([sessionless, other]);
    expect(a.raw).toEqual([]);
  });

  it('messages of another shape are routed by their fields', async () => {
    const { chromium, client, next, rootMessages } = setup();
    const a = await client('SA');
    const n = chromium.commands.length;
    a.send({ id: 3, method: 'Browser.getVersion' });
    const cmd = await next('Browser.getVersion', n);
    chromium.write(` { "sessionId" : "SA", "result": {"v": 1}, "id": ${cmd.id} } `);
    chromium.write('{"params":{"x":1},"method":"Page.frameNavigated","sessionId":"SA"}');
    chromium.write('{"params":{"x":2},"method":"Page.frameNavigated"}');
    chromium.write(`{"id":${cmd.id + 1000},"error":{"code":1,"message":"late"}}`); // nobody's
    await tick();
    expect(a.received()).toEqual([
      { id: 3, result: { v: 1 } },
      { params: { x: 1 }, method: 'Page.frameNavigated' },
    ]);
    expect(rootMessages).toEqual(['{"params":{"x":2},"method":"Page.frameNavigated"}']);
  });

  it('a message that is not a JSON object fails the pipe, not the server', async () => {
    for (const bad of ['[1,2]', '"text"', '42', 'null', '{"id":1,"result":', 'garbage']) {
      const { chromium, mux, rootClosed } = setup();
      chromium.write(bad);
      await tick();
      expect(chromium.pipe.failure, bad).toMatch(/^a malformed DevTools message \(/);
      expect(mux.root.isOpen, bad).toBe(false);
      expect(rootClosed(), bad).toBe(true);
    }
  });
});

describe('what a client may not do, answered as Chromium answers', () => {
  it('commands of the wrong shape, and sessions that are not its own', async () => {
    const { chromium, client } = setup();
    const a = await client('SA');
    const b = await client('SB');
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'PB', targetInfo: { targetId: 'TB' } },
      sessionId: 'SB',
    });
    await tick();
    const n = chromium.commands.length;
    a.send('{not json');
    a.send({ id: 'x', method: 'M' });
    a.send({ id: 1.5, method: 'M' });
    a.send([1]);
    a.send({ id: 2 });
    a.send({ id: 3, method: 'M', params: [1] });
    a.send({ id: 4, method: 'M', params: 'p' });
    a.send({ id: 5, method: 'M', sessionId: 'SB' }); // b's own session
    a.send({ id: 6, method: 'M', sessionId: 'PB' }); // a session b owns
    a.send({ id: 7, method: 'M', sessionId: 7 });
    await tick();
    expect(chromium.commands.length).toBe(n);
    expect(a.received()).toEqual([
      { error: { code: -32700, message: 'Message must be a valid JSON' } },
      { error: { code: -32600, message: "Message must have integer 'id' property" } },
      { error: { code: -32600, message: "Message must have integer 'id' property" } },
      { error: { code: -32600, message: "Message must have integer 'id' property" } },
      { id: 2, error: { code: -32600, message: "Message must have string 'method' property" } },
      {
        id: 3,
        error: { code: -32602, message: "Message has property 'params' but it is not an object" },
      },
      {
        id: 4,
        error: { code: -32602, message: "Message has property 'params' but it is not an object" },
      },
      { id: 5, error: { code: -32001, message: 'Session with given id not found.' } },
      { id: 6, error: { code: -32001, message: 'Session with given id not found.' } },
      { id: 7, error: { code: -32001, message: 'Session with given id not found.' } },
    ]);
    expect(b.raw.length).toBe(1); // only its own attachedToTarget event
  });

  it('a command without params is sent with empty params on its own session', async () => {
    const { chromium, client, next } = setup();
    const a = await client('SA');
    const n = chromium.commands.length;
    a.send({ id: 9, method: 'Page.enable' });
    expect(await next('Page.enable', n)).toMatchObject({ params: {}, sessionId: 'SA' });
  });

  it('unanswered commands are capped per client; answered ones no longer count', async () => {
    const { chromium, client } = setup();
    const a = await client('SA');
    const n = chromium.commands.length;
    for (let i = 1; i <= 10_000; i++) a.send({ id: i, method: 'Runtime.evaluate' });
    await tick();
    a.send({ id: 10_001, method: 'Runtime.evaluate' });
    expect(a.received().at(-1)).toEqual({
      id: 10_001,
      error: { code: -32000, message: 'More than 10000 commands awaiting their replies' },
    });
    const sent = chromium.commands.slice(n);
    expect(sent).toHaveLength(10_000);
    chromium.write(`{"id":${sent[0]!.id},"result":{},"sessionId":"SA"}`);
    await tick();
    a.send({ id: 10_002, method: 'Runtime.evaluate' });
    await tick();
    expect(chromium.commands.slice(n)).toHaveLength(10_001);
  });

  it('a departed client sends nothing more', async () => {
    const { chromium, client } = setup();
    const a = await client('SA');
    a.handle.close();
    await tick();
    const n = chromium.commands.length;
    a.send({ id: 1, method: 'Runtime.evaluate' });
    await tick();
    expect(chromium.commands.length).toBe(n);
  });
});

describe('the hooks hear only of what succeeded', () => {
  it('activation: activateTarget, and bringToFront on a page session, own or owned', async () => {
    const activated: string[] = [];
    const { chromium, client, next, mux } = setup({ onActivate: (t) => activated.push(t) });
    const page = await client('SP', { type: 'page', targetId: 'TP' } as never);
    const answer = async (method: string, n: number, ok: boolean, sessionId?: string) => {
      const cmd = await next(method, n);
      const tail = sessionId ? `,"sessionId":"${sessionId}"` : '';
      chromium.write(
        ok
          ? `{"id":${cmd.id},"result":{}${tail}}`
          : `{"id":${cmd.id},"error":{"code":-32000,"message":"no"}${tail}}`,
      );
      await tick();
    };
    let n = chromium.commands.length;
    page.send({ id: 1, method: 'Page.bringToFront' });
    await answer('Page.bringToFront', n, true, 'SP');
    n = chromium.commands.length;
    page.send({ id: 2, method: 'Target.activateTarget', params: { targetId: 'T2' } });
    await answer('Target.activateTarget', n, false);
    n = chromium.commands.length;
    page.send({ id: 3, method: 'Target.activateTarget', params: { targetId: 'T3' } });
    await answer('Target.activateTarget', n, true);
    n = chromium.commands.length;
    page.send({ id: 4, method: 'Target.activateTarget', params: { targetId: 5 } });
    await answer('Target.activateTarget', n, true);
    // a session it owns, announced with its target
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'SO', targetInfo: { targetId: 'TO' } },
      sessionId: 'SP',
    });
    await tick();
    n = chromium.commands.length;
    page.send({ id: 5, method: 'Page.bringToFront', sessionId: 'SO' });
    await answer('Page.bringToFront', n, true, 'SO');
    // the server's own activation counts too
    n = chromium.commands.length;
    mux.root.send({ id: 6, method: 'Target.activateTarget', params: { targetId: 'TR' } });
    await answer('Target.activateTarget', n, true);
    // a browser client's bringToFront has no page target
    const browser = await client('SB');
    n = chromium.commands.length;
    browser.send({ id: 7, method: 'Page.bringToFront' });
    await answer('Page.bringToFront', n, true, 'SB');
    expect(activated).toEqual(['TP', 'T3', 'TO', 'TR']);
  });

  it("a context a client created, before the client sees the reply; not the server's", async () => {
    const order: string[] = [];
    const { chromium, client, next, mux } = setup({
      onContextCreated: (id) => order.push(`hook ${id}`),
    });
    const a = await client('SA');
    a.handle.connect({
      send: (d) => order.push(`client ${String(JSON.parse(d.toString()).id)}`),
      close: () => {},
    });
    let n = chromium.commands.length;
    a.send({ id: 1, method: 'Target.createBrowserContext' });
    let cmd = await next('Target.createBrowserContext', n);
    chromium.write(`{"id":${cmd.id},"result":{"browserContextId":"CTX1"},"sessionId":"SA"}`);
    n = chromium.commands.length;
    a.send({ id: 2, method: 'Target.createBrowserContext' });
    cmd = await next('Target.createBrowserContext', n);
    chromium.write(`{"id":${cmd.id},"error":{"code":-1,"message":"no"},"sessionId":"SA"}`);
    n = chromium.commands.length;
    a.send({ id: 3, method: 'Target.createBrowserContext' });
    cmd = await next('Target.createBrowserContext', n);
    chromium.write(`{"id":${cmd.id},"result":{"browserContextId":7},"sessionId":"SA"}`);
    n = chromium.commands.length;
    mux.root.send({ id: 4, method: 'Target.createBrowserContext', params: {} });
    cmd = await next('Target.createBrowserContext', n);
    chromium.write(`{"id":${cmd.id},"result":{"browserContextId":"CTXR"}}`);
    await tick();
    expect(order).toEqual(['hook CTX1', 'client 1', 'client 2', 'client 3']);
  });

  it('a rewrite hook sees and replaces the params Chromium gets', async () => {
    const seen: string[] = [];
    const { chromium, client, next } = setup({
      rewrite: (method, params) => {
        seen.push(method);
        return method === 'Browser.setDownloadBehavior'
          ? { ...params, downloadPath: '/safe' }
          : params;
      },
    });
    const a = await client('SA');
    const n = chromium.commands.length;
    a.send({
      id: 1,
      method: 'Browser.setDownloadBehavior',
      params: { behavior: 'allow', downloadPath: '/etc' },
    });
    expect((await next('Browser.setDownloadBehavior', n)).params).toEqual({
      behavior: 'allow',
      downloadPath: '/safe',
    });
    expect(seen).toEqual(['Browser.setDownloadBehavior']);
  });
});

describe('sessions a client comes to own', () => {
  it('by its attachToTarget: only when it succeeds, with the target it named', async () => {
    const activated: string[] = [];
    const { chromium, client, next } = setup({ onActivate: (t) => activated.push(t) });
    const a = await client('SA');
    let n = chromium.commands.length;
    a.send({ id: 1, method: 'Target.attachToTarget', params: { targetId: 'T1', flatten: true } });
    let cmd = await next('Target.attachToTarget', n);
    chromium.write(
      `{"id":${cmd.id},"error":{"code":-32000,"message":"No target"},"sessionId":"SA"}`,
    );
    n = chromium.commands.length;
    a.send({ id: 2, method: 'Target.attachToTarget', params: { targetId: 'T1', flatten: true } });
    cmd = await next('Target.attachToTarget', n);
    chromium.write(`{"id":${cmd.id},"result":{"sessionId":"S1"},"sessionId":"SA"}`);
    await tick();
    n = chromium.commands.length;
    a.send({ id: 3, method: 'Page.bringToFront', sessionId: 'S1' });
    cmd = await next('Page.bringToFront', n);
    expect(cmd.sessionId).toBe('S1');
    chromium.write(`{"id":${cmd.id},"result":{},"sessionId":"S1"}`);
    await tick();
    expect(activated).toEqual(['T1']);
    // an attachToBrowserTarget of its own: owned, no target
    n = chromium.commands.length;
    a.send({ id: 4, method: 'Target.attachToBrowserTarget' });
    cmd = await next('Target.attachToBrowserTarget', n);
    chromium.write(`{"id":${cmd.id},"result":{"sessionId":"S2"},"sessionId":"SA"}`);
    await tick();
    a.send({ id: 5, method: 'Browser.getVersion', sessionId: 'S2' });
    expect((await next('Browser.getVersion')).sessionId).toBe('S2');
  });

  it('by an attachedToTarget on its session; a detachedFromTarget ends it', async () => {
    const { chromium, client, rootMessages } = setup();
    const a = await client('SA');
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'C1', targetInfo: {} },
      sessionId: 'SA',
    });
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { targetInfo: {} },
      sessionId: 'SA',
    });
    chromium.write({ method: 'Target.attachedToTarget', params: { sessionId: 'C2' } }); // the server's
    chromium.write({ method: 'Page.loadEventFired', params: {}, sessionId: 'C1' });
    chromium.write({ method: 'Page.loadEventFired', params: {}, sessionId: 'C2' });
    await tick();
    expect(a.received().map((m) => [m.method, m.sessionId])).toEqual([
      ['Target.attachedToTarget', undefined],
      ['Target.attachedToTarget', undefined],
      ['Page.loadEventFired', 'C1'],
    ]);
    expect(rootMessages).toHaveLength(2);
    chromium.write({
      method: 'Target.detachedFromTarget',
      params: { sessionId: 'C1' },
      sessionId: 'SA',
    });
    chromium.write({ method: 'Target.detachedFromTarget', params: {}, sessionId: 'SA' });
    chromium.write({ method: 'Target.detachedFromTarget', params: { sessionId: 'UNKNOWN' } });
    await tick();
    a.send({ id: 1, method: 'Page.enable', sessionId: 'C1' });
    expect(a.received().at(-1)).toEqual({
      id: 1,
      error: { code: -32001, message: 'Session with given id not found.' },
    });
    chromium.write({ method: 'Page.loadEventFired', params: {}, sessionId: 'C1' });
    await tick();
    expect(rootMessages.at(-1)).toBe(
      '{"method":"Page.loadEventFired","params":{},"sessionId":"C1"}',
    );
    expect(a.closed()).toBe(0);
  });
});

describe('the lifecycle', () => {
  it('opens a page target by id, flattened; a refusal or a reply without a session rejects', async () => {
    const { chromium, mux, next } = setup();
    let n = chromium.commands.length;
    const refused = mux.open({ type: 'page', targetId: 'NOPE' });
    let cmd = await next('Target.attachToTarget', n);
    expect(cmd.params).toEqual({ targetId: 'NOPE', flatten: true });
    expect(cmd.sessionId).toBeUndefined();
    chromium.write(
      `{"id":${cmd.id},"error":{"code":-32602,"message":"No target with given id found"}}`,
    );
    await expect(refused).rejects.toThrow('Target.attachToTarget failed');
    n = chromium.commands.length;
    const odd = mux.open({ type: 'browser' });
    cmd = await next('Target.attachToBrowserTarget', n);
    expect(cmd.params).toEqual({});
    chromium.write(`{"id":${cmd.id},"result":{"sessionId":5}}`);
    await expect(odd).rejects.toThrow('Target.attachToBrowserTarget failed');
    n = chromium.commands.length;
    const empty = mux.open({ type: 'browser' });
    cmd = await next('Target.attachToBrowserTarget', n);
    chromium.write(`{"id":${cmd.id},"result":{}}`);
    await expect(empty).rejects.toThrow('failed');
  });

  it('a client that has not connected gets what arrived meanwhile, in order, on connect', async () => {
    const { chromium, client } = setup();
    const a = await client('SA', { type: 'browser' }, false);
    chromium.write({ method: 'E.one', params: {}, sessionId: 'SA' });
    chromium.write({ method: 'E.two', params: {}, sessionId: 'SA' });
    await tick();
    expect(a.raw).toEqual([]);
    a.connect();
    expect(a.received().map((m) => m.method)).toEqual(['E.one', 'E.two']);
    chromium.write({ method: 'E.three', params: {}, sessionId: 'SA' });
    await tick();
    expect(a.received().map((m) => m.method)).toEqual(['E.one', 'E.two', 'E.three']);
  });

  it('a client that never connects is dropped past 64 MiB held, and told so when it does', async () => {
    const { chromium, client, next } = setup();
    const a = await client('SA', { type: 'browser' }, false);
    const n = chromium.commands.length;
    const big = 'x'.repeat(33 * 1024 * 1024);
    chromium.write(`{"method":"E.big","params":{"s":"${big}"},"sessionId":"SA"}`);
    await tick();
    expect(chromium.commands.length).toBe(n); // 33 MiB held: still there
    chromium.write(`{"method":"E.big","params":{"s":"${big}"},"sessionId":"SA"}`);
    expect((await next('Target.detachFromTarget', n)).params).toEqual({ sessionId: 'SA' });
    a.connect();
    expect(a.closed()).toBe(1);
    expect(a.raw).toEqual([]);
  });

  it('a departing client is detached once and the hook told once; its sessions are retired until Chromium confirms', async () => {
    let closedHook = 0;
    const { chromium, client, next, rootMessages } = setup({ onClientClosed: () => closedHook++ });
    const a = await client('SA');
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'C1' },
      sessionId: 'SA',
    });
    await tick();
    const n = chromium.commands.length;
    a.handle.close();
    a.handle.close();
    const detach = await next('Target.detachFromTarget', n);
    await tick();
    expect(chromium.commands.slice(n).map((c) => c.method)).toEqual(['Target.detachFromTarget']);
    expect(closedHook).toBe(1);
    chromium.write({ method: 'Page.loadEventFired', params: {}, sessionId: 'C1' });
    chromium.write({ method: 'Page.loadEventFired', params: {}, sessionId: 'SA' });
    await tick();
    expect(rootMessages).toEqual([]); // retired: nobody's
    chromium.write(`{"id":${detach.id},"result":{}}`);
    chromium.write({ method: 'Page.loadEventFired', params: {}, sessionId: 'C1' });
    await tick();
    // after the detach, an unknown session: the server's (and the detach's reply is nobody's)
    expect(rootMessages.map((m) => JSON.parse(m) as unknown)).toEqual([
      { method: 'Page.loadEventFired', params: {}, sessionId: 'C1' },
    ]);
  });

  it('a client whose page Chromium closed is closed, not detached again', async () => {
    let closedHook = 0;
    const { chromium, client } = setup({ onClientClosed: () => closedHook++ });
    const a = await client('SA');
    const n = chromium.commands.length;
    chromium.write({ method: 'Target.detachedFromTarget', params: { sessionId: 'SA' } });
    await tick();
    expect(a.closed()).toBe(1);
    expect(closedHook).toBe(1);
    expect(chromium.commands.slice(n).map((c) => c.method)).toEqual([]);
    a.handle.close(); // the relay closing it afterwards changes nothing
    await tick();
    expect(chromium.commands.length).toBe(n);
    expect(closedHook).toBe(1);
  });

  it('replies on their way to a departed client go nowhere', async () => {
    const { chromium, client, next, rootMessages } = setup();
    const a = await client('SA');
    const n = chromium.commands.length;
    a.send({ id: 1, method: 'Runtime.evaluate' });
    const cmd = await next('Runtime.evaluate', n);
    a.handle.close();
    chromium.write(`{"id":${cmd.id},"result":{},"sessionId":"SA"}`);
    await tick();
    expect(a.raw).toEqual([]);
    expect(rootMessages).toEqual([]);
    expect(chromium.pipe.isOpen).toBe(true); // a late reply is not a malformed message
  });

  it('the browser going away closes every client, rejects opens in flight, ends the server connection', async () => {
    let closedHook = 0;
    const { chromium, client, mux, next, rootClosed } = setup({
      onClientClosed: () => closedHook++,
    });
    const a = await client('SA');
    const b = await client('SB', { type: 'browser' }, false);
    const n = chromium.commands.length;
    const opening = mux.open({ type: 'browser' });
    await next('Target.attachToBrowserTarget', n);
    mux.root.close();
    await expect(opening).rejects.toThrow('Target.attachToBrowserTarget failed');
    expect(a.closed()).toBe(1);
    b.connect();
    expect(b.closed()).toBe(1);
    expect(rootClosed()).toBe(true);
    expect(mux.root.isOpen).toBe(false);
    expect(chromium.pipe.isOpen).toBe(false);
    expect(closedHook).toBe(0); // nothing to reset in a browser that is gone
    mux.close();
    expect(a.closed()).toBe(1);
    await expect(mux.open({ type: 'browser' })).rejects.toThrow('the browser is gone');
    // a server connection listening late is told at once
    let late = false;
    mux.root.listen({ message: () => {}, close: () => (late = true) });
    expect(late).toBe(true);
    // nothing is written any more
    mux.root.send({ id: 1, method: 'Browser.close', params: {} });
    expect(chromium.commands.filter((c) => c.method === 'Browser.close')).toEqual([]);
  });

  it('the server connection works through CdpConnection', async () => {
    const { chromium, mux, next } = setup();
    const conn = new CdpConnection(mux.root);
    const version = conn.send('Browser.getVersion');
    const cmd = await next('Browser.getVersion');
    chromium.write(`{"id":${cmd.id},"result":{"product":"Chrome/1"}}`);
    await expect(version).resolves.toEqual({ product: 'Chrome/1' });
  });
});
