/**
 * The commands the relay answers itself (chromium/refusals.ts), with the exact error a
 * `cdp_url` holder reads: a browser context with its own proxy, and the methods that would let
 * the browser act around the relay. Everything else goes to Chromium.
 */
import { describe, expect, it } from 'vitest';
import { CONTEXT_PROXY_REFUSED, refusal } from '../../src/server/chromium/refusals.js';

describe('refusal', () => {
  it('refuses a browser context with a proxy of its own, whatever the proxy', () => {
    expect(refusal('Target.createBrowserContext', { proxyServer: 'http://10.0.0.1:3128' })).toBe(
      CONTEXT_PROXY_REFUSED,
    );
    expect(refusal('Target.createBrowserContext', { proxyServer: '' })).toBe(CONTEXT_PROXY_REFUSED);
    expect(CONTEXT_PROXY_REFUSED).toMatch(/^burrow: a browser context cannot have a proxy/);
  });

  it('lets a browser context without a proxy through, and a proxyServer field elsewhere', () => {
    expect(refusal('Target.createBrowserContext', {})).toBeUndefined();
    expect(refusal('Target.createBrowserContext', { disposeOnDetach: true })).toBeUndefined();
    expect(
      refusal('Target.createTarget', { url: 'about:blank', proxyServer: 'x' }),
    ).toBeUndefined();
  });

  it.each([
    [
      'Target.exposeDevToolsProtocol',
      "burrow: Target.exposeDevToolsProtocol is refused: it would give a page the DevTools protocol past the relay's checks",
    ],
    [
      'Target.setRemoteLocations',
      'burrow: Target.setRemoteLocations is refused: it would make the browser connect to addresses of its own',
    ],
    [
      'Tethering.bind',
      "burrow: Tethering.bind is refused: it would tunnel connections into the instance's network",
    ],
  ])('refuses %s whatever its parameters', (method, message) => {
    expect(refusal(method, {})).toBe(message);
    expect(refusal(method, { targetId: 'T', port: 9222 })).toBe(message);
  });

  it.each([
    'Target.attachToBrowserTarget',
    'Page.navigate',
    'Runtime.evaluate',
    'Tethering.unbind',
  ])('lets %s through', (method) => {
    expect(refusal(method, {})).toBeUndefined();
  });
});
