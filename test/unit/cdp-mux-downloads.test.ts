/**
 * The multiplexer's hooks that keep downloads in the instance (src/server/chromium/mux.ts, used by
 * downloads.ts), against a scripted "Chromium" on an in-memory CdpPipe: a client's command is
 * written as the hook rewrites it; a context a client creates is announced to the server before
 * the client has the reply (so the server's own command is on the pipe first); a client leaving
 * is announced.
 */
import { expect, it } from 'vitest';
import { CdpMux } from '../../src/server/chromium/mux.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const tick = () => new Promise((r) => setImmediate(r));

it('rewrites client commands, announces created contexts before the reply, and departures', async () => {
  const chromium = fakeChromium();
  const events: string[] = [];
  const mux = new CdpMux(chromium.pipe, {
    rewrite: (method, params) =>
      method === 'Browser.setDownloadBehavior' ? { ...params, downloadPath: '/inside' } : params,
    onContextCreated: (id) => events.push(`context ${id}`),
    onClientClosed: () => events.push('closed'),
  });
  const opening = mux.open({ type: 'browser' });
  await tick();
  chromium.write({ id: chromium.commands[0]!.id, result: { sessionId: 'S1' } });
  const handle = await opening;
  handle.connect({
    send: (data) => {
      const msg = JSON.parse(data.toString()) as { id?: number };
      events.push(`reply ${msg.id}`);
    },
    close: () => {},
  });
  const send = (msg: Record<string, unknown>) => handle.receive(Buffer.from(JSON.stringify(msg)));

  send({
    id: 1,
    method: 'Browser.setDownloadBehavior',
    params: { behavior: 'allow', downloadPath: '/mine' },
  });
  send({ id: 2, method: 'Target.createBrowserContext', params: {} });
  await tick();
  const [behaviour, create] = chromium.commands.slice(1);
  expect(behaviour).toMatchObject({
    method: 'Browser.setDownloadBehavior',
    params: { behavior: 'allow', downloadPath: '/inside' },
    sessionId: 'S1',
  });
  chromium.write({ id: behaviour!.id, result: {}, sessionId: 'S1' });
  chromium.write({ id: create!.id, result: { browserContextId: 'CTX9' }, sessionId: 'S1' });
  await tick();
  expect(events).toEqual(['reply 1', 'context CTX9', 'reply 2']);

  handle.close();
  expect(events.at(-1)).toBe('closed');
  mux.close();
});
