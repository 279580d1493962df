/**
 * A `cdp_url` WebSocket to a paused browser instance ends within a bound: refused at once while
 * the instance is paused (its frozen Chromium would never answer), and a handshake that waits on a
 * browser that does not answer (paused mid-handshake, stuck) ends with a 504 after the upgrade
 * deadline instead of hanging.
 */
import { readdirSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { UPGRADE_TIMEOUT_MS } from '../../../src/server/http/app.js';
import { pidsMatching } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const server = useServer({}, { timeout: 180_000 });
const instance = useInstance(server, 'browser', {}, 180_000);

/** How a WebSocket to `url` ends: opened, or refused with a status and body, and when. */
function attempt(url: string, limitMs: number) {
  const started = performance.now();
  return new Promise<{ outcome: string; status?: number; body?: string; ms: number }>((resolve) => {
    const ws = new WebSocket(url);
    const done = (r: { outcome: string; status?: number; body?: string }) => {
      clearTimeout(timer);
      ws.terminate();
      resolve({ ...r, ms: performance.now() - started });
    };
    const timer = setTimeout(() => done({ outcome: 'still waiting' }), limitMs);
    ws.once('open', () => done({ outcome: 'open' }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => done({ outcome: 'refused', status: res.statusCode!, body }));
    });
    ws.once('error', (err) => done({ outcome: `error: ${err.message}` }));
  });
}

/** Pids of every process of instance `id`: those running as its pid 1's host uid. */
function instanceProcesses(instanceId: string): number[] {
  const init = pidsMatching(`burrow-init-${instanceId}`)[0];
  if (init === undefined) return [];
  const { uid } = statSync(`/proc/${init}`);
  return readdirSync('/proc')
    .map(Number)
    .filter((pid) => {
      try {
        return Number.isInteger(pid) && statSync(`/proc/${pid}`).uid === uid;
      } catch {
        return false;
      }
    });
}

const pause = () => server.api(`/v1/instance/${instance.id}/pause`, { method: 'POST' });
const resume = () => server.api(`/v1/instance/${instance.id}/resume`, { method: 'POST' });

describe('cdp_url of a paused browser instance', () => {
  it('is refused at once with a status that says the instance is paused', async () => {
    expect((await pause()).status).toBe(200);
    try {
      const r = await attempt(instance.cdpUrl, 20_000);
      expect(r).toMatchObject({ outcome: 'refused', status: 400 });
      expect(JSON.parse(r.body!)).toEqual({ detail: `Instance ${instance.id} is paused` });
      expect(r.ms).toBeLessThan(2_000);
    } finally {
      expect((await resume()).status).toBe(200);
    }
    expect((await attempt(instance.cdpUrl, 20_000)).outcome).toBe('open');
  }, 60_000);

  it('a handshake the browser never answers ends with a 504 within the deadline', async () => {
    // Chromium stopped without the server knowing (a pause that lands mid-handshake, a stuck
    // browser): the upgrade must not wait for it forever.
    const pids = instanceProcesses(instance.id);
    expect(pids.length).toBeGreaterThan(1);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    try {
      const r = await attempt(instance.cdpUrl, UPGRADE_TIMEOUT_MS + 10_000);
      expect(r).toMatchObject({ outcome: 'refused', status: 504 });
      expect(JSON.parse(r.body!)).toEqual({
        detail: `Instance ${instance.id} did not answer the WebSocket connection within ${UPGRADE_TIMEOUT_MS / 1000} s`,
      });
      expect(r.ms).toBeLessThan(UPGRADE_TIMEOUT_MS + 3_000);
    } finally {
      for (const pid of pids) process.kill(pid, 'SIGCONT');
    }
    expect((await attempt(instance.cdpUrl, 20_000)).outcome).toBe('open');
  }, 60_000);
});
