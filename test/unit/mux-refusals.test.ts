/**
 * What a client of the multiplexer (chromium/mux.ts) reads when the relay refuses for Chromium:
 * a command that would act around the relay is answered with Chromium's error shape (code
 * -32000, the reason) and never written to the pipe; a session the browser would not give is
 * an error naming the step, not a client.
 */
import { describe, expect, it } from 'vitest';
import { CdpMux } from '../../src/server/chromium/mux.js';
import { refusal } from '../../src/server/chromium/refusals.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const tick = () => new Promise((r) => setImmediate(r));

async function connected() {
  const chromium = fakeChromium();
  const mux = new CdpMux(chromium.pipe, {});
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget');
  chromium.write({ id: attach.id, result: { sessionId: 'SA' } });
  const handle = await opening;
  const raw: Buffer[] = [];
  handle.connect({ send: (d) => raw.push(d), close: () => undefined });
  return { chromium, mux, handle, raw };
}

describe('a refused command', () => {
  it.each([
    ['Tethering.bind', { port: 9222 }],
    ['Target.exposeDevToolsProtocol', { targetId: 'T' }],
    ['Target.createBrowserContext', { proxyServer: 'http://10.0.0.1:3128' }],
  ])('%s is answered as Chromium answers, and never reaches it', async (method, params) => {
    const { chromium, handle, raw } = await connected();
    const before = chromium.commands.length;
    handle.receive(Buffer.from(JSON.stringify({ id: 5, method, params })));
    await tick();
    expect(raw.map((d) => JSON.parse(d.toString()) as unknown)).toEqual([
      { id: 5, error: { code: -32000, message: refusal(method, params) } },
    ]);
    expect(chromium.commands.slice(before).map((c) => c.method)).not.toContain(method);
  });
});

describe('a session the browser would not give', () => {
  it('fails the open with the step that failed', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe, {});
    const opening = mux.open({ type: 'page', targetId: 'T1' });
    const attach = await chromium.next('Target.attachToTarget');
    chromium.write({ id: attach.id, error: { code: -32602, message: 'No target with given id' } });
    await expect(opening).rejects.toThrow('Target.attachToTarget failed');
  });
});
