/**
 * burrow extension: devices and identity of a browser instance (start options `device`,
 * `user_agent`, `locale`, `timezone_id`, `geolocation`). The server applies them to every page
 * of every browser context before the page runs (src/server/chromium/identity.ts).
 *
 * The device names are Playwright's: src/api/devices.ts is generated from playwright-core by
 * scripts/devices.ts, so the server needs no Playwright at run time.
 */
import { z } from 'zod';
import { DEVICE_TABLE, type DeviceDescriptor } from './devices.js';

export type { DeviceDescriptor } from './devices.js';

export const DEVICES: Readonly<Record<string, DeviceDescriptor>> = DEVICE_TABLE;
export const DEVICE_NAMES: readonly string[] = Object.keys(DEVICES);

/** Levenshtein distance of two short strings, case-insensitive. */
function distance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** Up to `n` device names closest to `name`: ones containing it first, then by edit distance. */
export function closeDeviceNames(name: string, n = 3): string[] {
  const lower = name.toLowerCase().trim();
  const scored = DEVICE_NAMES.map((d) => {
    const contains = lower.length > 0 && d.toLowerCase().includes(lower);
    return { d, score: contains ? -1 / (d.length + 1) : distance(name, d) };
  });
  scored.sort((x, y) => x.score - y.score || x.d.localeCompare(y.d));
  return scored.slice(0, n).map((s) => s.d);
}

/** Whether `zone` is an IANA time zone this Node (and so Chromium's ICU) knows. */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** Whether `locale` is a well-formed BCP 47 tag, e.g. `de-DE`. */
export function isLocale(locale: string): boolean {
  try {
    return Intl.getCanonicalLocales(locale).length === 1;
  } catch {
    return false;
  }
}

export const DeviceName = z
  .string()
  .min(1)
  .max(100)
  .superRefine((name, ctx) => {
    if (Object.hasOwn(DEVICES, name)) return;
    ctx.addIssue({
      code: 'custom',
      message: `unknown device "${name}"; close names: ${closeDeviceNames(name)
        .map((d) => `"${d}"`)
        .join(', ')} (Playwright's device names)`,
    });
  });

export const Locale = z
  .string()
  .min(2)
  .max(35)
  .refine(isLocale, { message: 'is not a BCP 47 locale such as "de-DE"' });

export const TimeZoneId = z
  .string()
  .min(1)
  .max(64)
  .superRefine((zone, ctx) => {
    if (!isTimeZone(zone)) {
      ctx.addIssue({
        code: 'custom',
        message: `unknown time zone "${zone}" (an IANA name such as "Europe/Berlin")`,
      });
    }
  });

export const Geolocation = z.object({
  latitude: z.number().min(-90).max(90),
  longitude: z.number().min(-180).max(180),
  /** Metres; default 0. */
  accuracy: z.number().min(0).optional(),
});
export type Geolocation = z.input<typeof Geolocation>;

/** The identity a browser instance's pages get, resolved from the start request. */
export interface BrowserIdentity {
  readonly device?: DeviceDescriptor;
  readonly userAgent?: string;
  readonly locale?: string;
  readonly timezoneId?: string;
  readonly geolocation?: { latitude: number; longitude: number; accuracy?: number | undefined };
}

/** The identity named by a start request's options; `undefined` when it names none. */
export function identityOf(options: {
  device?: string | undefined;
  user_agent?: string | undefined;
  locale?: string | undefined;
  timezone_id?: string | undefined;
  geolocation?: Geolocation | undefined;
}): BrowserIdentity | undefined {
  const device = options.device !== undefined ? DEVICES[options.device] : undefined;
  const identity: BrowserIdentity = {
    ...(device && { device }),
    ...(options.user_agent !== undefined && { userAgent: options.user_agent }),
    ...(options.locale !== undefined && { locale: options.locale }),
    ...(options.timezone_id !== undefined && { timezoneId: options.timezone_id }),
    ...(options.geolocation && { geolocation: options.geolocation }),
  };
  return Object.keys(identity).length > 0 ? identity : undefined;
}
