/**
 * A client's command too large to decode (src/server/chromium/command.ts) is located on its first
 * and last bytes and its params passed on as bytes; a params object that closes early, to smuggle
 * a `sessionId` of another client's to the top level, is refused, and so are the few methods
 * whose params the mux reads.
 */
import { describe, expect, it } from 'vitest';
import { CdpMux } from '../../src/server/chromium/mux.js';
import { fakeChromium } from '../helpers/fake-chromium.js';
import { CDP_MAX_DECODED_BYTES } from '../../src/api/cdp-limits.js';

async function client(mux: CdpMux, chromium: ReturnType<typeof fakeChromium>, session: string) {
  const after = chromium.commands.length;
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget', after);
  chromium.write({ id: attach.id, result: { sessionId: session } });
  const handle = await opening;
  const received: Record<string, unknown>[] = [];
  handle.connect({
    send: (data) => received.push(JSON.parse(data.toString()) as Record<string, unknown>),
    close: () => {},
  });
  return { handle, received, send: (text: string) => handle.receive(Buffer.from(text)) };
}

const pad = 'x'.repeat(CDP_MAX_DECODED_BYTES + 10);
/** Waits for `check`, at most 10 s (the assertions after it say what was missing). */
const until = async (check: () => boolean) => {
  const end = performance.now() + 10_000;
  while (!check() && performance.now() < end) await new Promise((r) => setImmediate(r));
};

describe('large client commands', () => {
  it('pass their params as bytes, on the sender session', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const a = await client(mux, chromium, 'SA');
    const n = chromium.commands.length;
    a.send(`{"id":7,"method":"Runtime.evaluate","params":{"expression":"'${pad}'","x":[{}]}}`);
    await until(() => chromium.commands.length > n);
    const wire = chromium.commands[n]!;
    expect(wire).toMatchObject({ method: 'Runtime.evaluate', sessionId: 'SA' });
    expect(wire.params).toEqual({ expression: `'${pad}'`, x: [{}] });
    chromium.write(`{"id":${wire.id},"result":{},"sessionId":"SA"}`);
    await until(() => a.received.length > 0);
    expect(a.received).toEqual([{ id: 7, result: {} }]);
  });

  it('a second large command sent while the first is checked waits for it, in order', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const a = await client(mux, chromium, 'SA');
    const n = chromium.commands.length;
    // 16 MiB: many of the check's 4 ms slices, so the second arrives while the first is checked
    const big = 'y'.repeat(16 * 1024 * 1024);
    a.send(`{"id":1,"method":"Runtime.evaluate","params":{"expression":"'${big}'"}}`);
    a.send(`{"id":2,"method":"Runtime.evaluate","params":{"expression":"'${big}'"}}`);
    // past 16 MiB written the mux waits for its barrier's reply (inbound.ts): Chromium answers it
    const answered = new Set<number>();
    const sent = () => {
      for (const c of chromium.commands.slice(n)) {
        if (c.method !== 'Browser.getVersion' || answered.has(c.id)) continue;
        answered.add(c.id);
        chromium.write({ id: c.id, result: {} });
      }
      return chromium.commands.slice(n).filter((c) => c.method !== 'Browser.getVersion');
    };
    await until(() => sent().length >= 2);
    expect(sent().map((c) => [c.method, c.id])).toEqual([
      ['Runtime.evaluate', expect.any(Number)],
      ['Runtime.evaluate', expect.any(Number)],
    ]);
    expect(answered.size).toBeGreaterThan(0);
    expect(a.received).toEqual([]);
  }, 30_000); // two scans of 16 MiB: seconds under the mutation run's instrumentation

  it("in Puppeteer's order too (id after the params)", async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const a = await client(mux, chromium, 'SA');
    const b = await client(mux, chromium, 'SB');
    const n = chromium.commands.length;
    a.send(`{"method":"Runtime.evaluate","params":{"expression":"'${pad}'"},"id":9}`);
    b.send(
      `{"method":"Runtime.evaluate","params":{"expression":"'${pad}'"},"id":4,"sessionId":"SA"}`,
    );
    await until(() => chromium.commands.length > n && b.received.length > 0);
    expect(chromium.commands.slice(n)).toEqual([
      {
        id: expect.any(Number) as number,
        method: 'Runtime.evaluate',
        params: { expression: `'${pad}'` },
        sessionId: 'SA',
      },
    ]);
    expect(b.received).toEqual([
      { id: 4, error: expect.objectContaining({ code: -32001 }) as unknown },
    ]);
  });

  it("refuse params that close early to smuggle another client's session", async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const a = await client(mux, chromium, 'SA');
    await client(mux, chromium, 'SB');
    const n = chromium.commands.length;
    a.send(`{"id":1,"method":"Runtime.evaluate","params":{"a":"${pad}"},"sessionId":"SB","b":{}}`);
    a.send(`{"id":2,"method":"Target.createBrowserContext","params":{"p":"${pad}"}}`);
    a.send(`{"id":3,"method":"Runtime.evaluate","params":{"a":"${pad}"} }`);
    await until(() => a.received.length === 3);
    expect(a.received.map((r) => r.id).sort()).toEqual([1, 2, 3]);
    for (const reply of a.received) expect(reply).toHaveProperty('error.code');
    // the one whose params are not one object: an invalid request, as Chromium answers one
    expect(a.received.find((r) => r.id === 1)).toMatchObject({ error: { code: -32600 } });
    expect(chromium.commands.slice(n)).toEqual([]);
  });
});
