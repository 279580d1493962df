/**
 * What a `cdp_url` client sends faster than Chromium takes it in (src/server/chromium/inbound.ts):
 * at most the pipe's window is written before Chromium answers the server's barrier, the client's
 * socket is paused past its own window and read again once its commands are written, and a
 * barrier left unanswered for `CDP_PIPE_DEAF_MS` fails the pipe unless the instance is paused.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CDP_PIPE_DEAF_MS, CDP_PIPE_WINDOW_BYTES } from '../../src/api/cdp-limits.js';
import { CdpMux } from '../../src/server/chromium/mux.js';
import { fakeChromium } from '../helpers/fake-chromium.js';

const KiB = 1024;

async function client(mux: CdpMux, chromium: ReturnType<typeof fakeChromium>) {
  const opening = mux.open({ type: 'browser' });
  const attach = await chromium.next('Target.attachToBrowserTarget');
  chromium.write({ id: attach.id, result: { sessionId: 'SA' } });
  const handle = await opening;
  const flow: string[] = [];
  handle.connect({
    send: () => {},
    close: () => flow.push('close'),
    pause: () => flow.push('pause'),
    resume: () => flow.push('resume'),
  });
  return { handle, flow };
}

const settle = async () => {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
};
const command = (id: number) =>
  Buffer.from(
    `{"id":${id},"method":"Target.getTargets","params":{"x":"${'a'.repeat(900 * KiB)}"}}`,
  );

afterEach(() => {
  vi.useRealTimers();
});

describe('commands waiting for Chromium', () => {
  it('are written a window at a time; the client is not read past its own', async () => {
    const chromium = fakeChromium();
    const mux = new CdpMux(chromium.pipe);
    const { handle, flow } = await client(mux, chromium);
    const n = chromium.commands.length;
    const count = Math.ceil((2 * CDP_PIPE_WINDOW_BYTES) / (900 * KiB)) + 4;
    for (let i = 1; i <= count; i++) handle.receive(command(i));
    await settle();
    const written = () =>
      chromium.commands.slice(n).filter((c) => c.method === 'Target.getTargets');
    const barrier = chromium.commands.slice(n).find((c) => c.method === 'Browser.getVersion');
    expect(barrier).toBeDefined();
    expect(written().length * 900 * KiB).toBeLessThanOrEqual(CDP_PIPE_WINDOW_BYTES);
    expect(flow).toEqual(['pause']);
    // Chromium answers its barriers: everything goes, and the client is read again
    for (let round = 0; round < 20 && written().length < count; round++) {
      for (const c of chromium.commands.slice(n)) {
        if (c.method === 'Browser.getVersion' && !c.params.answered) {
          c.params.answered = true;
          chromium.write({ id: c.id, result: {} });
        }
      }
      await settle();
    }
    expect(written().length).toBe(count);
    expect(flow).toEqual(['pause', 'resume']);
    expect(chromium.pipe.isOpen).toBe(true);
  }, 30_000);

  it('a barrier unanswered for the deaf time fails the pipe, unless the instance is paused', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    for (const paused of [true, false]) {
      const chromium = fakeChromium();
      const mux = new CdpMux(chromium.pipe);
      const { handle, flow } = await client(mux, chromium);
      if (paused) mux.freeze(true);
      const count = Math.ceil(CDP_PIPE_WINDOW_BYTES / (900 * KiB));
      for (let i = 1; i <= count; i++) handle.receive(command(i));
      await settle();
      expect(chromium.commands.some((c) => c.method === 'Browser.getVersion')).toBe(true);
      vi.advanceTimersByTime(CDP_PIPE_DEAF_MS + 1);
      expect(chromium.pipe.isOpen).toBe(paused);
      if (paused) {
        // resumed: the clock starts again
        mux.freeze(false);
        vi.advanceTimersByTime(CDP_PIPE_DEAF_MS - 1000);
        expect(chromium.pipe.isOpen).toBe(true);
        vi.advanceTimersByTime(2000);
      }
      expect(chromium.pipe.isOpen).toBe(false);
      expect(chromium.pipe.failure).toMatch(/took in no DevTools message/);
      expect(flow).toContain('close');
    }
  }, 30_000);
});
