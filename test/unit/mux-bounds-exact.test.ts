/**
 * The DevTools multiplexer's byte bounds at their exact values (src/server/chromium/mux.ts): what
 * is held for a client that has not connected yet, what reaches the server's own connection as an
 * event, and what it gets as a reply are allowed up to and including the bound and refused one
 * byte past it. A bound off by one either way drops a client or a screenshot that fits, or lets
 * through one that does not (bounds-streams.test.ts has the far-past-the-bound cases).
 */
import { describe, expect, it } from 'vitest';
import {
  CDP_MAX_ROOT_EVENT_BYTES as MAX_ROOT_EVENT_BYTES,
  CDP_MAX_ROOT_REPLY_BYTES as MAX_ROOT_REPLY_BYTES,
} from '../../src/api/cdp-limits.js';
import { CdpMux } from '../../src/server/chromium/mux.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const tick = () => new Promise((r) => setImmediate(r));
const MiB = 1024 * 1024;
/** What the relay holds for a client that has not connected (README: "once 64 MiB wait for it"). */
const HELD_BYTES = 64 * MiB;

/** A JSON text `{<head>"s":"xxx…"}}` of exactly `bytes` bytes. */
function sized(head: string, bytes: number): string {
  const shell = `${head}"s":""}}`;
  return `${head}"s":"${'x'.repeat(bytes - shell.length)}"}}`;
}

async function setup() {
  const chromium = fakeChromium();
  const mux = new CdpMux(chromium.pipe);
  const root: string[] = [];
  mux.root.listen({ message: (m) => root.push(m), close: () => {} });
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget');
  chromium.write({ id: attach.id, result: { sessionId: 'SA' } });
  const client = await opening;
  return { chromium, mux, root, client };
}

describe('a client that has not connected yet', () => {
  it('is held exactly 64 MiB of its messages, and dropped at one byte more', async () => {
    const { chromium, client } = await setup();
    const n = chromium.commands.length;
    // an event of its own session reaches it without the sessionId: this is what it is held
    const delivered = sized('{"method":"E.big","params":{', HELD_BYTES);
    chromium.write(`${delivered.slice(0, -1)},"sessionId":"SA"}`);
    await tick();
    await tick();
    expect(chromium.commands.length).toBe(n); // not detached: it fits
    chromium.write('{"method":"E.one","params":{},"sessionId":"SA"}');
    await tick();
    expect(chromium.commands.slice(n).map((c) => [c.method, c.params])).toEqual([
      ['Target.detachFromTarget', { sessionId: 'SA' }],
    ]);
    let closed = 0;
    const got: Buffer[] = [];
    client.connect({ send: (d) => got.push(d), close: () => void closed++ });
    expect(closed).toBe(1);
    expect(got).toEqual([]);
  });
});

describe("the server's own connection", () => {
  it('hears an event of exactly MAX_ROOT_EVENT_BYTES, not one a byte longer', async () => {
    const { chromium, root } = await setup();
    const fits = sized('{"method":"Page.fits","params":{', MAX_ROOT_EVENT_BYTES);
    const over = sized('{"method":"Page.over","params":{', MAX_ROOT_EVENT_BYTES + 1);
    chromium.write(fits);
    chromium.write(over);
    chromium.write('{"method":"Page.small","params":{}}');
    await tick();
    await tick();
    expect(root.map((m) => [m.length, m.slice(0, 22)])).toEqual([
      [MAX_ROOT_EVENT_BYTES, '{"method":"Page.fits",'],
      [35, '{"method":"Page.small"'],
    ]);
  });

  it('gets a reply of exactly MAX_ROOT_REPLY_BYTES, and an error for one a byte longer', async () => {
    const { chromium, mux, root } = await setup();
    const reply = async (ownId: number, bytes: number) => {
      const n = chromium.commands.length;
      mux.root.send({ id: ownId, method: 'Page.captureScreenshot', params: {} });
      const cmd = await chromium.next('Page.captureScreenshot', n);
      // the reply as the server gets it, with its own id: the wire id is put in its place
      const text = sized(`{"id":${ownId},"result":{`, bytes);
      chromium.write(text.replace(`{"id":${ownId},`, `{"id":${cmd.id},`));
      while (root.length === 0) await tick();
      return root.splice(0);
    };
    const fits = await reply(5, MAX_ROOT_REPLY_BYTES);
    expect(fits.map((m) => m.length)).toEqual([MAX_ROOT_REPLY_BYTES]);
    expect(fits[0]!.slice(0, 18)).toBe('{"id":5,"result":{');
    const over = await reply(6, MAX_ROOT_REPLY_BYTES + 1);
    expect(over.map((m) => JSON.parse(m) as unknown)).toEqual([
      {
        id: 6,
        error: {
          code: -32000,
          message: `a reply of ${MAX_ROOT_REPLY_BYTES + 1} bytes (the server reads at most ${MAX_ROOT_REPLY_BYTES})`,
        },
      },
    ]);
  });
});
