/**
 * The CDP relay refuses the commands that would let the browser act around it (issue 35), from
 * the position of a `cdp_url` holder with a raw WebSocket: `Target.exposeDevToolsProtocol` would
 * give the page a binding that speaks the protocol to the browser unfiltered. Sent on the
 * client's own session and on a page session it names, it gets an error reply, and the page has
 * no such binding afterwards; `Target.setRemoteLocations` and `Tethering.bind` are refused alike.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  instanceProcesses,
  startBrowser,
  testServer,
  type TestServer,
} from '../../helpers/server.js';

let server: TestServer;
let cdpUrl: string;
beforeAll(async () => {
  server = await testServer();
  ({ cdpUrl } = await startBrowser(server));
});
afterAll(async () => {
  await server?.close();
  expect(instanceProcesses()).toEqual([]);
});

type Reply = { result?: Record<string, unknown>; error?: { code: number; message: string } };

/** A minimal CDP client on the browser endpoint: each command's whole reply. */
class RawCdp {
  #next = 1;
  readonly #pending = new Map<number, (msg: Reply) => void>();
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as Reply & { id?: number };
      if (typeof msg.id === 'number') this.#pending.get(msg.id)?.(msg);
    });
  }
  static async open(url: string): Promise<RawCdp> {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return new RawCdp(ws);
  }
  send(method: string, params: object = {}, sessionId?: string): Promise<Reply> {
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#pending.set(id, (msg) => {
        this.#pending.delete(id);
        resolve(msg);
      });
      this.ws.send(JSON.stringify({ id, method, params, ...(sessionId && { sessionId }) }));
    });
  }
  async evaluate(expression: string, sessionId: string): Promise<unknown> {
    const reply = await this.send(
      'Runtime.evaluate',
      { expression, returnByValue: true },
      sessionId,
    );
    return (reply.result as { result: { value: unknown } }).result.value;
  }
  close(): void {
    this.ws.close();
  }
}

describe('the CDP relay refuses what would act around it', () => {
  it('Target.exposeDevToolsProtocol: refused on every session, and the page gets no binding', async () => {
    const cdp = await RawCdp.open(cdpUrl);
    try {
      const targets = await cdp.send('Target.getTargets');
      const { targetInfos } = targets.result as {
        targetInfos: { type: string; targetId: string }[];
      };
      const targetId = targetInfos.find((t) => t.type === 'page')!.targetId;
      const attached = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
      const sessionId = (attached.result as { sessionId: string }).sessionId;
      expect(await cdp.evaluate('typeof window.cdp', sessionId)).toBe('undefined');

      // top level (the client's browser session), then on the page's own session
      const top = await cdp.send('Target.exposeDevToolsProtocol', {
        targetId,
        bindingName: 'cdp',
      });
      const onPage = await cdp.send(
        'Target.exposeDevToolsProtocol',
        { targetId, bindingName: 'cdp2', inheritPermissions: true },
        sessionId,
      );
      for (const reply of [top, onPage]) {
        expect(reply.result).toBeUndefined();
        expect(reply.error?.code).toBe(-32000);
        expect(reply.error?.message).toMatch(
          /^burrow: Target\.exposeDevToolsProtocol is refused: .*DevTools protocol/,
        );
      }
      expect(await cdp.evaluate('typeof window.cdp', sessionId)).toBe('undefined');
      expect(await cdp.evaluate('typeof window.cdp2', sessionId)).toBe('undefined');
      // the relay still serves the client: the refusal ended only that command
      expect(await cdp.evaluate('1 + 1', sessionId)).toBe(2);
    } finally {
      cdp.close();
    }
  });

  it('Target.setRemoteLocations and Tethering.bind are refused the same way', async () => {
    const cdp = await RawCdp.open(cdpUrl);
    try {
      const remote = await cdp.send('Target.setRemoteLocations', {
        locations: [{ host: '127.0.0.1', port: 9 }],
      });
      expect(remote.error?.message).toMatch(/^burrow: Target\.setRemoteLocations is refused: /);
      const bind = await cdp.send('Tethering.bind', { port: 9222 });
      expect(bind.error?.message).toMatch(/^burrow: Tethering\.bind is refused: /);
      expect((await cdp.send('Browser.getVersion')).result).toHaveProperty('product');
    } finally {
      cdp.close();
    }
  });
});
