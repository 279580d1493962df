/**
 * What a browser instance's Chromium asks the network for on its own, seen at the egress: not the
 * time query, optimization hints, AI-mode checks or search preconnects Playwright's own launch
 * turns off (BASE_FLAGS in src/server/chromium/chromium.ts). What Debian's Chromium still asks
 * for (update.googleapis.com, accounts.google.com) it asks under Playwright's launch too.
 */
import { describe, expect, it } from 'vitest';
import { useServer } from '../../helpers/use-server.js';

const lines: string[] = [];
const server = useServer({
  logLevel: 'debug',
  logDestination: { write: (line) => void lines.push(line) },
  sandboxStock: 0,
});

/** Host names the egress was asked for (allowed, or refused as unresolvable), from its log. */
function asked(): string[] {
  const hosts = new Set<string>();
  for (const line of lines) {
    const entry = JSON.parse(line) as { egress?: string; target?: string; reason?: string };
    if (!entry.egress || entry.egress === 'client') continue;
    // allowed: its target; refused here (nothing resolves): the name it could not resolve
    const host =
      entry.target?.replace(/:\d+$/, '') ?? /cannot resolve (\S+)/.exec(entry.reason ?? '')?.[1];
    if (host) hosts.add(host);
  }
  return [...hosts].sort();
}

describe('a browser left alone', () => {
  it('asks the network for nothing Playwright’s own launch turns off', async () => {
    const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    // the time query went out ~50 ms after the first tab; the updater's within 1 s
    await new Promise((r) => setTimeout(r, 3000));
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    const hosts = asked();
    console.log(`hosts asked for by an idle Chromium: ${hosts.join(', ') || 'none'}`);
    expect(
      hosts.filter((h) => !['update.googleapis.com', 'accounts.google.com'].includes(h)),
    ).toEqual([]);
  });
});
