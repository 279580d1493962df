/**
 * The server's own table of device descriptors (src/api/devices.ts, written by
 * scripts/devices.ts) is the installed playwright-core's, so that it cannot drift silently when
 * playwright-core is upgraded; and the names the start option takes are checked by it.
 */
import { devices } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { StartRequest } from '../../src/api/schemas.js';
import { closeDeviceNames, DEVICES, identityOf } from '../../src/api/identity.js';

describe('device descriptors', () => {
  it("equal the installed playwright-core's (run scripts/devices.ts after an upgrade)", () => {
    expect(Object.keys(DEVICES)).toEqual(Object.keys(devices));
    for (const [name, d] of Object.entries(devices)) {
      const { defaultBrowserType: _browser, ...descriptor } = d;
      expect(DEVICES[name], name).toEqual(descriptor);
    }
  });

  it('name close devices for an unknown one', () => {
    expect(closeDeviceNames('Pixel 55')).toContain('Pixel 5');
    expect(closeDeviceNames('iphone 13')[0]).toMatch(/^iPhone 13/);
    const result = StartRequest.safeParse({ instance_type: 'browser', device: 'Pixle 5' });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.message).toContain('unknown device "Pixle 5"');
    expect(result.error?.issues[0]?.message).toContain('"Pixel 5"');
  });

  it('check time zones and locales, and resolve the identity of a start', () => {
    expect(StartRequest.safeParse({ timezone_id: 'Europe/Berlin' }).success).toBe(true);
    expect(StartRequest.safeParse({ timezone_id: 'Europe/Nowhere' }).success).toBe(false);
    expect(StartRequest.safeParse({ locale: 'de-DE' }).success).toBe(true);
    expect(StartRequest.safeParse({ locale: 'de_DE!' }).success).toBe(false);
    expect(StartRequest.safeParse({ geolocation: { latitude: 91, longitude: 0 } }).success).toBe(
      false,
    );
    expect(identityOf({})).toBeUndefined();
    expect(identityOf({ device: 'Pixel 5', locale: 'de-DE' })).toEqual({
      device: DEVICES['Pixel 5'],
      locale: 'de-DE',
    });
  });
});
