/**
 * The live view's token is its own (ISOLATION.md, "The boundary"): whoever is lent a `stream_url`
 * sees and drives the screen, but its token does not open `/cdp` (DevTools over the instance:
 * cookies, `Runtime.evaluate`). The `cdp_url`'s token, the instance's own, still opens both: its
 * holder controls the browser anyway, and a client that builds the live view from it keeps working.
 */
import { describe, expect, it } from 'vitest';
import { handshakeStatus } from '../../helpers/handshake.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const server = useServer({}, { timeout: 180_000 });
const instance = useInstance(server, 'browser', {}, 180_000);

async function streamUrl(): Promise<URL> {
  const res = await server.api(`/v1/instance/${instance.id}/stream_url`);
  expect(res.status).toBe(200);
  return new URL(((await res.json()) as { stream_url: string }).stream_url);
}

describe("a live view's token", () => {
  it('opens the live view and never the CDP relay', async () => {
    const stream = await streamUrl();
    const cdp = new URL(instance.cdpUrl);
    const streamToken = stream.searchParams.get('token')!;
    const cdpToken = cdp.searchParams.get('token')!;
    expect(streamToken).toMatch(/^[\w-]+$/);
    const ws = `ws://${stream.host}/stream/${instance.id}/ws`;

    // the live view with its own token: page and socket
    expect((await fetch(stream)).status).toBe(200);
    expect(await handshakeStatus(`${ws}?token=${encodeURIComponent(streamToken)}`)).toBe(101);
    // the same token on the CDP relay: 401, on the browser's endpoint as on any other
    const onCdp = (token: string) =>
      `${cdp.origin}${cdp.pathname}?token=${encodeURIComponent(token)}`.replace(/^http/, 'ws');
    expect(await handshakeStatus(onCdp(streamToken))).toBe(401);
    expect(await handshakeStatus(onCdp(cdpToken))).toBe(101);
    expect(streamToken).not.toBe(cdpToken);
    // the instance's own token still opens the live view
    expect(await handshakeStatus(`${ws}?token=${encodeURIComponent(cdpToken)}`)).toBe(101);
  }, 60_000);
});
