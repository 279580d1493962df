/**
 * What the DevTools multiplexer's ownership and its hooks take from Chromium's messages
 * (src/server/chromium/mux.ts), when a message is not what Chromium normally writes (any process
 * of the instance may write into a copy of the pipe): a reply that is an error gives the client
 * nothing, whatever `result` it also carries (no session to own, no context for the hook), and a
 * target id that is not a string never reaches the activation hook; a message is routed by the
 * sessionId at its very end, not by one nested in its params.
 */
import { describe, expect, it } from 'vitest';
import { CdpMux, type CdpMuxOptions } from '../../src/server/chromium/mux.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const tick = () => new Promise((r) => setImmediate(r));

async function setup(opts: CdpMuxOptions) {
  const chromium = fakeChromium();
  const mux = new CdpMux(chromium.pipe, opts);
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget');
  chromium.write({ id: attach.id, result: { sessionId: 'SA' } });
  const client = await opening;
  const received: Record<string, unknown>[] = [];
  client.connect({
    send: (d) => received.push(JSON.parse(d.toString()) as Record<string, unknown>),
    close: () => {},
  });
  /** Send `command` as the client; Chromium answers with `answer(wire id)`. */
  const roundTrip = async (command: Record<string, unknown>, answer: (id: number) => string) => {
    const n = chromium.commands.length;
    client.receive(Buffer.from(JSON.stringify(command)));
    const wire = await chromium.next(command.method as string, n);
    chromium.write(answer(wire.id));
    await tick();
    return wire;
  };
  return { chromium, mux, client, received, roundTrip };
}

describe('an error reply that also carries a result', () => {
  it('gives the client no session and tells the context hook nothing', async () => {
    const contexts: string[] = [];
    const { chromium, client, received, roundTrip } = await setup({
      onContextCreated: (id) => contexts.push(id),
    });
    await roundTrip(
      { id: 1, method: 'Target.attachToTarget', params: { targetId: 'T', flatten: true } },
      (id) =>
        `{"id":${id},"error":{"code":-32000,"message":"no"},"result":{"sessionId":"STOLEN"},"sessionId":"SA"}`,
    );
    await roundTrip(
      { id: 2, method: 'Target.createBrowserContext' },
      (id) =>
        `{"id":${id},"error":{"code":-32000,"message":"no"},"result":{"browserContextId":"CTX"},"sessionId":"SA"}`,
    );
    expect(contexts).toEqual([]);
    // the session named in the error reply is not the client's to use
    const n = chromium.commands.length;
    client.receive(Buffer.from('{"id":3,"method":"Runtime.evaluate","sessionId":"STOLEN"}'));
    await tick();
    expect(chromium.commands.length).toBe(n);
    expect(received.at(-1)).toEqual({
      id: 3,
      error: { code: -32001, message: 'Session with given id not found.' },
    });
  });
});

describe('a target id that is not a string', () => {
  it('never reaches the activation hook', async () => {
    const activated: unknown[] = [];
    const { chromium, roundTrip } = await setup({ onActivate: (t) => activated.push(t) });
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'C1', targetInfo: { targetId: 42 } },
      sessionId: 'SA',
    });
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId: 'C2', targetInfo: { targetId: 'T2' } },
      sessionId: 'SA',
    });
    await tick();
    for (const [id, session] of [
      [1, 'C1'],
      [2, 'C2'],
    ] as const) {
      await roundTrip(
        { id, method: 'Page.bringToFront', sessionId: session },
        (wire) => `{"id":${wire},"result":{},"sessionId":"${session}"}`,
      );
    }
    expect(activated).toEqual(['T2']);
  });
});

describe('the session a message is routed by', () => {
  it("is the one at its end, not another client's named inside its params", async () => {
    const { chromium, received, mux } = await setup({});
    const n = chromium.commands.length;
    const opening = mux.open({ type: 'browser' });
    const attach = await chromium.next('Target.attachToBrowserTarget', n);
    chromium.write({ id: attach.id, result: { sessionId: 'SB' } });
    const other = await opening;
    const toOther: Buffer[] = [];
    other.connect({ send: (d) => toOther.push(d), close: () => {} });
    chromium.write('{"method":"Custom.event","params":{"a":1,"sessionId":"SB"},"sessionId":"SA"}');
    await tick();
    expect(toOther).toEqual([]);
    expect(received).toEqual([{ method: 'Custom.event', params: { a: 1, sessionId: 'SB' } }]);
  });
});
