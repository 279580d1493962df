/**
 * The mux's navigation check (issue 20): a client's `Page.navigate` waits for the egress's
 * verdict with its session's later commands (its other sessions go on); a refused one gets a
 * trap — the server's own session on the page, `Fetch` on its documents, the refused host's
 * request failed with the verdict's reason, others continued, the session detached once the
 * navigation answered; a page whose requests the client intercepts itself gets no trap.
 */
import { describe, expect, it } from 'vitest';
import { CdpMux, type MuxClient } from '../../src/server/chromium/mux.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const tick = () => new Promise((r) => setImmediate(r));

/** A browser client owning page sessions PA (target TA) and PB (target TB). */
async function setup(check: (url: string) => Promise<{ reason: string } | undefined>) {
  const chromium = fakeChromium();
  const mux = new CdpMux(chromium.pipe, { checkNavigation: check });
  const rootMessages: string[] = [];
  mux.root.listen({ message: (m) => rootMessages.push(m), close: () => {} });
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget');
  chromium.write({ id: attach.id, result: { sessionId: 'SB' } });
  const handle: MuxClient = await opening;
  const received: Record<string, unknown>[] = [];
  handle.connect({
    send: (data) => received.push(JSON.parse(data.toString()) as Record<string, unknown>),
    close: () => {},
  });
  for (const [sessionId, targetId] of [
    ['PA', 'TA'],
    ['PB', 'TB'],
  ]) {
    chromium.write({
      method: 'Target.attachedToTarget',
      params: { sessionId, targetInfo: { targetId, type: 'page' } },
      sessionId: 'SB',
    });
  }
  await tick();
  const send = (msg: Record<string, unknown>) => handle.receive(Buffer.from(JSON.stringify(msg)));
  return { chromium, received, send, rootMessages, handle };
}

describe('CdpMux navigation check', () => {
  it('holds the session of a navigation being checked, in order; other sessions go on', async () => {
    let verdict!: (v: undefined) => void;
    const checked: string[] = [];
    const { chromium, send } = await setup((url) => {
      checked.push(url);
      return new Promise((r) => (verdict = r));
    });
    const n = chromium.commands.length;
    send({ id: 1, method: 'Page.navigate', params: { url: 'http://a.test/' }, sessionId: 'PA' });
    send({ id: 2, method: 'Runtime.evaluate', params: { expression: '1' }, sessionId: 'PA' });
    send({ id: 3, method: 'Runtime.evaluate', params: { expression: '2' }, sessionId: 'PB' });
    await tick();
    expect(checked).toEqual(['http://a.test/']);
    expect(chromium.commands.slice(n).map((c) => [c.method, c.sessionId])).toEqual([
      ['Runtime.evaluate', 'PB'],
    ]);
    verdict(undefined);
    await tick();
    expect(chromium.commands.slice(n).map((c) => [c.method, c.sessionId])).toEqual([
      ['Runtime.evaluate', 'PB'],
      ['Page.navigate', 'PA'],
      ['Runtime.evaluate', 'PA'],
    ]);
  });

  it('fails the refused host’s document request through a session of its own', async () => {
    const { chromium, send, received, rootMessages } = await setup(async (url) =>
      url.includes('refused.test') ? { reason: 'NameNotResolved' } : undefined,
    );
    const n = chromium.commands.length;
    send({
      id: 1,
      method: 'Page.navigate',
      params: { url: 'https://refused.test:8443/x' },
      sessionId: 'PA',
    });
    const attach = await chromium.next('Target.attachToTarget', n);
    expect(attach.params).toEqual({ targetId: 'TA', flatten: true });
    chromium.write({ id: attach.id, result: { sessionId: 'TRAP' } });
    const enable = await chromium.next('Fetch.enable', n);
    expect(enable.sessionId).toBe('TRAP');
    expect(enable.params).toEqual({
      patterns: [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Request' }],
    });
    // nothing of the client's went out before the trap was set
    expect(chromium.commands.slice(n).some((c) => c.method === 'Page.navigate')).toBe(false);
    chromium.write({ id: enable.id, result: {}, sessionId: 'TRAP' });
    const navigate = await chromium.next('Page.navigate', n);
    expect(navigate.sessionId).toBe('PA');
    const paused = (requestId: string, url: string) =>
      chromium.write({
        method: 'Fetch.requestPaused',
        params: { requestId, request: { url }, resourceType: 'Document' },
        sessionId: 'TRAP',
      });
    paused('r1', 'https://other.test:8443/');
    paused('r2', 'https://refused.test:8443/x');
    const cont = await chromium.next('Fetch.continueRequest', n);
    expect(cont).toMatchObject({ params: { requestId: 'r1' }, sessionId: 'TRAP' });
    const fail = await chromium.next('Fetch.failRequest', n);
    expect(fail).toMatchObject({
      params: { requestId: 'r2', errorReason: 'NameNotResolved' },
      sessionId: 'TRAP',
    });
    // the trap's own commands are answered to nobody: neither the server nor the client
    chromium.write({ id: cont.id, result: {}, sessionId: 'TRAP' });
    chromium.write({ id: fail.id, result: {}, sessionId: 'TRAP' });
    await tick();
    expect(rootMessages.filter((m) => m.startsWith('{"id"'))).toEqual([]);
    // the navigation's answer reaches the client, and the trap goes
    chromium.write({
      id: navigate.id,
      result: { frameId: 'F', errorText: 'net::ERR_NAME_NOT_RESOLVED' },
      sessionId: 'PA',
    });
    const detach = await chromium.next('Target.detachFromTarget', n);
    expect(detach.params).toEqual({ sessionId: 'TRAP' });
    await tick();
    expect(received.at(-1)).toEqual({
      id: 1,
      result: { frameId: 'F', errorText: 'net::ERR_NAME_NOT_RESOLVED' },
      sessionId: 'PA',
    });
  });

  it('checks only a Page.navigate to a URL on a page: the rest goes at once, untrapped', async () => {
    const checked: unknown[] = [];
    const { chromium, send } = await setup(async (url) => {
      checked.push(url);
      return { reason: 'BlockedByClient' };
    });
    const n = chromium.commands.length;
    // a URL in another command, a navigation on the browser's session, one without a URL
    send({
      id: 1,
      method: 'Target.createTarget',
      params: { url: 'http://b.test/' },
      sessionId: 'PA',
    });
    send({ id: 2, method: 'Page.navigate', params: { url: 'http://b.test/' } });
    send({ id: 3, method: 'Page.navigate', params: { url: 42 }, sessionId: 'PB' });
    send({ id: 4, method: 'Runtime.evaluate', params: { expression: '1' }, sessionId: 'PA' });
    await tick();
    expect(chromium.commands.slice(n).map((c) => [c.method, c.sessionId])).toEqual([
      ['Target.createTarget', 'PA'],
      ['Page.navigate', 'SB'],
      ['Page.navigate', 'PB'],
      ['Runtime.evaluate', 'PA'],
    ]);
    expect(checked).toEqual([]);
  });

  it('of a client that left meanwhile: neither the navigation nor a trap goes out', async () => {
    let verdict!: (v: { reason: string }) => void;
    const { chromium, send, handle } = await setup(() => new Promise((r) => (verdict = r)));
    const n = chromium.commands.length;
    send({ id: 1, method: 'Page.navigate', params: { url: 'http://c.test/' }, sessionId: 'PA' });
    send({ id: 2, method: 'Runtime.evaluate', params: { expression: '1' }, sessionId: 'PA' });
    await tick();
    handle.close();
    verdict({ reason: 'AddressUnreachable' });
    await tick();
    await tick();
    expect(chromium.commands.slice(n).map((c) => c.method)).toEqual(['Target.detachFromTarget']);
  });

  it('sets no trap on a page whose requests the client intercepts itself', async () => {
    const { chromium, send } = await setup(async () => ({ reason: 'BlockedByClient' }));
    send({ id: 1, method: 'Fetch.enable', params: {}, sessionId: 'PA' });
    const n = chromium.commands.length;
    send({ id: 2, method: 'Page.navigate', params: { url: 'http://b.test/' }, sessionId: 'PA' });
    await chromium.next('Page.navigate', n);
    expect(chromium.commands.slice(n).map((c) => c.method)).toEqual(['Page.navigate']);
    // another page of the same client is trapped as usual
    send({ id: 3, method: 'Page.navigate', params: { url: 'http://b.test/' }, sessionId: 'PB' });
    const attach = await chromium.next('Target.attachToTarget', n);
    expect(attach.params).toEqual({ targetId: 'TB', flatten: true });
  });
});
