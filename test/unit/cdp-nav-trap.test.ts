/**
 * The navigation trap (chromium/trap.ts) as Chromium and the clients would see it: the server's
 * own session pauses the page's document requests, fails the one to the refused host with the
 * chosen `net::ERR_*`, lets every other go on, and leaves nothing enabled behind when a step
 * fails or the trap is released. Pages of clients that intercept requests themselves are left
 * alone.
 */
import { describe, expect, it } from 'vitest';
import { NavigationTraps, type TrapPort } from '../../src/server/chromium/trap.js';
import type { CdpParams } from '../../src/server/chromium/transport.js';
import { incoming, type Parsed } from '../../src/server/chromium/wire.js';

/** A browser that answers the trap's commands, and what the trap sent it. */
function browser(answers: { attach?: Parsed; enable?: 'fail' } = {}) {
  const sent: string[] = [];
  const port: TrapPort = {
    command: (method: string, params: CdpParams, sessionId?: string) => {
      sent.push(`${sessionId ?? 'root'} ${method} ${JSON.stringify(params)}`);
      if (method === 'Target.attachToTarget') {
        return Promise.resolve(answers.attach ?? { id: 1, result: { sessionId: 'TRAP' } });
      }
      if (answers.enable === 'fail') return Promise.reject(new Error('Fetch.enable: no'));
      return Promise.resolve({ id: 2, result: {} });
    },
    fire: (method, params, sessionId) =>
      sent.push(`${sessionId} ${method} ${JSON.stringify(params)}`),
    detach: (sessionId) => sent.push(`${sessionId} detach`),
  };
  return { port, sent };
}

const paused = (params: unknown) =>
  incoming(
    Buffer.from(JSON.stringify({ method: 'Fetch.requestPaused', params, sessionId: 'TRAP' })),
  );

describe('a trap set on a page', () => {
  it('fails the document request to the refused host and lets others go on', async () => {
    const { port, sent } = browser();
    const traps = new NavigationTraps(port);
    const release = await traps.set('T1', 'http://blocked.test:8080/x', 'BlockedByClient');
    sent.length = 0;
    expect(
      traps.event(
        'TRAP',
        paused({ requestId: 'r1', request: { url: 'http://blocked.test:8080/y' } }),
      ),
    ).toBe(true);
    expect(
      traps.event('TRAP', paused({ requestId: 'r2', request: { url: 'http://ok.test/' } })),
    ).toBe(true);
    expect(sent).toEqual([
      'TRAP Fetch.failRequest {"requestId":"r1","errorReason":"BlockedByClient"}',
      'TRAP Fetch.continueRequest {"requestId":"r2"}',
    ]);
    release();
  });

  it('is held by other events of its session and by a paused request with no URL', async () => {
    const { port, sent } = browser();
    const traps = new NavigationTraps(port);
    const release = await traps.set('T1', 'http://blocked.test/', 'AccessDenied');
    sent.length = 0;
    const other = incoming(Buffer.from('{"method":"Fetch.other","params":{},"sessionId":"TRAP"}'));
    expect(traps.event('TRAP', other)).toBe(true);
    expect(traps.event('TRAP', paused({ requestId: 'r0' }))).toBe(true);
    expect(traps.event('TRAP', paused({ requestId: 'r1', request: {} }))).toBe(true);
    expect(
      traps.event('TRAP', paused({ requestId: 'r2', request: { url: 'http://blocked.test/' } })),
    ).toBe(true);
    expect(sent).toEqual([
      'TRAP Fetch.continueRequest {"requestId":"r0"}',
      'TRAP Fetch.continueRequest {"requestId":"r1"}',
      'TRAP Fetch.failRequest {"requestId":"r2","errorReason":"AccessDenied"}',
    ]);
    release();
  });

  it('lets go (detaches once) on a paused request it cannot read', async () => {
    for (const params of [
      { request: { url: 'http://blocked.test/' } },
      undefined,
      { requestId: 'r', request: { url: 'no url' } },
    ]) {
      const { port, sent } = browser();
      const traps = new NavigationTraps(port);
      await traps.set('T1', 'http://blocked.test/', 'AccessDenied');
      sent.length = 0;
      expect(traps.event('TRAP', paused(params))).toBe(true);
      expect(sent).toEqual(['TRAP detach']);
      // the session is no trap's any more: its messages go where a client's would
      expect(
        traps.event('TRAP', paused({ requestId: 'r', request: { url: 'http://blocked.test/' } })),
      ).toBe(false);
    }
  });

  it('lets go on a paused request too large to decode', async () => {
    const { port, sent } = browser();
    const traps = new NavigationTraps(port);
    await traps.set('T1', 'http://blocked.test/', 'AccessDenied');
    sent.length = 0;
    const big = paused({
      requestId: 'r',
      request: { url: 'http://blocked.test/' },
      pad: 'x'.repeat(2 << 20),
    });
    expect(traps.event('TRAP', big)).toBe(true);
    expect(sent).toEqual(['TRAP detach']);
  });

  it('detaches its session once, however often it is released', async () => {
    const { port, sent } = browser();
    const release = await new NavigationTraps(port).set(
      'T1',
      'http://blocked.test/',
      'AccessDenied',
    );
    release();
    release();
    expect(sent.filter((s) => s.endsWith('detach'))).toEqual(['TRAP detach']);
  });

  it('enables nothing when Chromium gives it no session', async () => {
    const { port, sent } = browser({ attach: { id: 1, error: { code: -32000 } } });
    await expect(
      new NavigationTraps(port).set('T1', 'http://blocked.test/', 'AccessDenied'),
    ).rejects.toThrow('Target.attachToTarget failed');
    expect(sent).toHaveLength(1);
  });

  it('leaves nothing behind when Chromium refuses to pause requests', async () => {
    const { port, sent } = browser({ enable: 'fail' });
    const traps = new NavigationTraps(port);
    await expect(traps.set('T1', 'http://blocked.test/', 'AccessDenied')).rejects.toThrow(
      'Fetch.enable: no',
    );
    expect(sent.at(-1)).toBe('TRAP detach');
    expect(
      traps.event('TRAP', paused({ requestId: 'r', request: { url: 'http://blocked.test/' } })),
    ).toBe(false);
  });
});

describe('pages of clients that intercept requests themselves', () => {
  it('are known by the session that enabled Fetch, until it disables it or goes', () => {
    const traps = new NavigationTraps(browser().port);
    expect(traps.intercepting('T1')).toBe(false);
    traps.command('Fetch.enable', 'S1', 'T1');
    expect(traps.intercepting('T1')).toBe(true);
    expect(traps.intercepting('T2')).toBe(false);
    traps.command('Fetch.disable', 'S1', 'T1');
    expect(traps.intercepting('T1')).toBe(false);
    traps.command('Fetch.enable', 'S2', 'T1');
    traps.forget('S2');
    expect(traps.intercepting('T1')).toBe(false);
  });

  it('are every page when Fetch is enabled on the browser', () => {
    const traps = new NavigationTraps(browser().port);
    traps.command('Fetch.enable', 'B', undefined);
    expect(traps.intercepting('T9')).toBe(true);
  });
});
