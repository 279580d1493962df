/**
 * A browser instance's Chromium has read its cookie database by the time its start answers
 * (src/server/chromium/session.ts `#init`). Chromium reads it on the first request that needs
 * cookies; a local launch happens to do so during its start-up, long before its first page, but an
 * instance did it on the first `goto`'s path (5-8 ms of it, seen in Chromium's net log). The
 * database open among Chromium's descriptors is the sign it was read.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { instancePids } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

const server = useServer();

/** The files named `Cookies` the processes of instance `id` hold open. */
function openCookieFiles(id: string): string[] {
  const files = new Set<string>();
  for (const pid of instancePids(id)) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.endsWith('/Cookies')) files.add(target);
      }
    } catch {
      /* gone, or not ours to read */
    }
  }
  return [...files];
}

describe('a started browser', () => {
  it('has read its cookie database before its first page', async () => {
    const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    try {
      // the read was asked for at the start; give its answer a moment (no client did anything)
      const deadline = Date.now() + 5000;
      while (openCookieFiles(id).length === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(openCookieFiles(id)).toEqual([
        '/home/user/.config/burrow-chromium/profile/Default/Cookies',
      ]);
    } finally {
      await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    }
  });
});
