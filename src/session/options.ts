/**
 * `openSession` options: idiomatic camelCase, validated before any request. The wire fields reuse
 * the contract's own schemas (`StartRequest`), so the bounds are never written twice.
 */
import { z } from 'zod';
import {
  INSTANCE_TYPES,
  StartRequest,
  type ProxySettings,
  type Resolution,
  type RunnableInstanceType,
} from '../api/index.js';
import { Burrow, ConfigurationError } from '../client/index.js';
import { DRIVER_NAMES, type DriverName } from './driver.js';

export interface ReconnectOptions {
  /** Attempts before giving up (then `reconnectFailed` is emitted). Default 5. */
  retries?: number;
  /** Delay before the first attempt, in milliseconds; doubles each attempt. Default 250. */
  minDelayMs?: number;
  /** Longest delay between attempts, in milliseconds. Default 5 000. */
  maxDelayMs?: number;
}

export interface OpenSessionOptions {
  /** Driver to connect: `'playwright'` (playwright-core) or `'puppeteer'` (puppeteer-core). Default `'playwright'`. */
  driver?: DriverName;
  /**
   * `'browser'` (Chromium only) or `'ubuntu'` (a Linux desktop; the session also calls
   * `browser/start` and, on stop, `browser/stop`). Default `'browser'`.
   */
  instanceType?: RunnableInstanceType;
  /** Hours until the server terminates the instance, 0.01–24. Default: the server's, 1 hour. */
  timeoutHours?: number;
  /**
   * Seconds without an API call and without a CDP or live-view client after which the server
   * stops the instance (`end_reason: "idle"`). The session's own CDP connection counts, so an
   * open session is never idle. Default none.
   */
  idleTimeoutSeconds?: number;
  /** `[width, height]` of the screen in pixels. Default: the server's, `[1024, 768]`. */
  resolution?: Resolution;
  /** Bare host names (no scheme) the instance's browser refuses, subdomains included. Default none. */
  blockedDomains?: string[];
  /**
   * An upstream proxy for everything the instance sends out, Playwright's shape:
   * `{ server: 'http://host:port' | 'https://…' | 'socks5://…', username?, password?, bypass? }`
   * (`bypass`: comma-separated hosts reached directly). The instance's egress chains to it after
   * its own checks (`blockedDomains` still apply); the server keeps the credentials in memory
   * only. Default none.
   */
  proxy?: ProxySettings;
  /**
   * Ids of browser extensions uploaded with `client.extensions.upload` (`POST /v1/extensions`),
   * loaded by the instance's Chromium in every context, those the driver creates included.
   * Browser instances only. Default none.
   */
  extensions?: string[];
  /**
   * A persistent browser profile (`{ name, save_changes }`): the instance's whole Chromium
   * profile is restored from it, and with `save_changes: true` written back when the session
   * stops. One live instance per profile. Browser instances only. Default none.
   */
  profile?: { name: string; save_changes?: boolean };
  // --- devices and identity (src/api/identity.ts); browser instances only ---
  /**
   * A Playwright device name (`'Pixel 5'`, `'iPhone 13'`, …): its viewport, scale, mobile, touch
   * and user agent, applied by the server to every page of every context, those the driver creates
   * included (a context given its own `viewport` keeps it). An unknown name is refused with close
   * names. Default none.
   */
  device?: string;
  /** BCP 47 locale of every page: `navigator.language`, `Intl`, `Accept-Language`. Default none. */
  locale?: string;
  /** IANA time zone of every page, e.g. `'Europe/Berlin'`. Default none. */
  timezoneId?: string;
  /** The position every page gets, the permission granted: `{ latitude, longitude, accuracy? }`. */
  geolocation?: { latitude: number; longitude: number; accuracy?: number };
  /** The user agent every page sends and sees (over the device's). Default none. */
  userAgent?: string;
  /**
   * A saved auth state's id or name, applied before `openSession` returns. A name that several
   * states share is an `AmbiguousAuthStateError`. Default none.
   */
  authState?: string;
  /**
   * Base URL of a remote server. Default env `BURROW_BASE_URL`; without either (and without
   * `client`), the embedded server: started in this process on a random loopback port, shared by
   * the process's sessions, stopped when the last one stops.
   */
  baseUrl?: string;
  /** API key of the remote server. Default env `BURROW_API_KEY`. Not used by the embedded server. */
  apiKey?: string;
  /** A `Burrow` client to use instead of `baseUrl` and `apiKey`; the session never closes it. */
  client?: Burrow;
  /**
   * Aborts opening (start, wait, connect, auth); the instance, if it exists, is stopped. An open
   * session is not affected: call `stop()`.
   */
  signal?: AbortSignal;
  /**
   * Milliseconds the whole opening may take (start, wait until `running`, connect, auth); then
   * `SessionStartError` with code `start_timeout`. Default 120 000; env `BURROW_START_TIMEOUT_MS`.
   */
  startTimeoutMs?: number;
  /**
   * Reconnect by itself when the CDP socket drops while the instance still runs, with exponential
   * backoff. `true` means `{ retries: 5, minDelayMs: 250, maxDelayMs: 5000 }`. Default `false`:
   * the session emits `disconnected` and you call `reconnect()`.
   */
  reconnect?: boolean | ReconnectOptions;
  /**
   * Files between this machine and the remote browser, as with a local one: `setInputFiles` /
   * file choosers take local files (uploaded to the instance first), and downloads land in the
   * driver's download directory here (`download.saveAs()`, `download.path()`). The driver then
   * talks to the instance through a small proxy in this process (src/session/transfer.ts).
   * Default `true`; `false` connects the driver straight to `cdp_url`.
   */
  transfer?: boolean;
}

const DEFAULT_START_TIMEOUT_MS = 120_000;
const MAX_TIMER_MS = 2 ** 31 - 1;

const Reconnect = z.strictObject({
  retries: z.int().min(0).max(100).optional(),
  minDelayMs: z.int().min(0).max(MAX_TIMER_MS).optional(),
  maxDelayMs: z.int().min(0).max(MAX_TIMER_MS).optional(),
});

const Options = z
  .strictObject({
    driver: z.enum(DRIVER_NAMES).optional(),
    instanceType: z.enum(INSTANCE_TYPES).optional(),
    timeoutHours: StartRequest.shape.timeout_hours.unwrap().optional(), // the server fills its default
    idleTimeoutSeconds: StartRequest.shape.idle_timeout_seconds,
    resolution: StartRequest.shape.resolution,
    blockedDomains: StartRequest.shape.blocked_domains,
    proxy: StartRequest.shape.proxy,
    extensions: StartRequest.shape.extensions,
    profile: StartRequest.shape.profile,
    device: StartRequest.shape.device,
    locale: StartRequest.shape.locale,
    timezoneId: StartRequest.shape.timezone_id,
    geolocation: StartRequest.shape.geolocation,
    userAgent: StartRequest.shape.user_agent,
    authState: z.string().min(1).optional(),
    baseUrl: z.url({ protocol: /^https?$/ }).optional(),
    apiKey: z.string().min(1).optional(),
    client: z.instanceof(Burrow).optional(),
    signal: z.instanceof(AbortSignal).optional(),
    startTimeoutMs: z.int().min(1).max(MAX_TIMER_MS).optional(),
    reconnect: z.union([z.boolean(), Reconnect]).optional(),
    transfer: z.boolean().optional(),
  })
  .refine((o) => !o.client || (o.baseUrl === undefined && o.apiKey === undefined), {
    message: 'pass either client, or baseUrl and apiKey, not both',
    path: ['client'],
  });

// Keeps the documented interface and the schema in step, key for key.
type Keys<T> = keyof { [K in keyof T]-?: unknown };
const sameKeys: [Keys<OpenSessionOptions>] extends [Keys<z.input<typeof Options>>]
  ? [Keys<z.input<typeof Options>>] extends [Keys<OpenSessionOptions>]
    ? true
    : false
  : false = true;
void sameKeys;

export interface ReconnectPolicy {
  retries: number;
  minDelayMs: number;
  maxDelayMs: number;
}

/** Options after validation and defaults. */
export interface ResolvedOptions {
  driver: DriverName;
  instanceType: RunnableInstanceType;
  /** The `POST /v1/start` body. */
  start: StartRequest;
  authState: string | undefined;
  /** Where the API is: a client given, a remote base URL, or the embedded server. */
  endpoint:
    | { kind: 'client'; client: Burrow }
    | { kind: 'remote'; baseUrl: string; apiKey: string | undefined }
    | { kind: 'embedded' };
  signal: AbortSignal | undefined;
  startTimeoutMs: number;
  reconnect: ReconnectPolicy | undefined;
  /** Whether the driver connects through the transfer proxy. */
  transfer: boolean;
}

const issueText = (error: z.ZodError) =>
  error.issues.map((i) => `${i.path.join('.') || '(options)'}: ${i.message}`).join('; ');

function envTimeout(): number | undefined {
  const text = process.env.BURROW_START_TIMEOUT_MS;
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > MAX_TIMER_MS) {
    throw new ConfigurationError(
      'invalid_option',
      `BURROW_START_TIMEOUT_MS must be a positive integer of milliseconds, not "${text}"`,
    );
  }
  return value;
}

/** Validates `options` (throwing `ConfigurationError` code `invalid_option`) and applies defaults. */
export function resolveOptions(options: OpenSessionOptions = {}): ResolvedOptions {
  const parsed = Options.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError('invalid_option', `openSession: ${issueText(parsed.error)}`);
  }
  const o = parsed.data;
  const baseUrl = o.baseUrl ?? (process.env.BURROW_BASE_URL || undefined);
  const reconnect = o.reconnect === true ? {} : o.reconnect || undefined;
  const instanceType = o.instanceType ?? 'browser';
  return {
    driver: o.driver ?? 'playwright',
    instanceType,
    start: {
      instance_type: instanceType,
      ...(o.timeoutHours !== undefined && { timeout_hours: o.timeoutHours }),
      ...(o.idleTimeoutSeconds !== undefined && { idle_timeout_seconds: o.idleTimeoutSeconds }),
      ...(o.resolution !== undefined && { resolution: o.resolution }),
      ...(o.blockedDomains !== undefined && { blocked_domains: o.blockedDomains }),
      ...(o.proxy !== undefined && { proxy: o.proxy }),
      ...(o.extensions !== undefined && { extensions: o.extensions }),
      ...(o.profile !== undefined && { profile: o.profile }),
      ...(o.device !== undefined && { device: o.device }),
      ...(o.locale !== undefined && { locale: o.locale }),
      ...(o.timezoneId !== undefined && { timezone_id: o.timezoneId }),
      ...(o.geolocation !== undefined && { geolocation: o.geolocation }),
      ...(o.userAgent !== undefined && { user_agent: o.userAgent }),
    },
    authState: o.authState,
    endpoint: o.client
      ? { kind: 'client', client: o.client }
      : baseUrl
        ? { kind: 'remote', baseUrl, apiKey: o.apiKey }
        : { kind: 'embedded' },
    signal: o.signal,
    startTimeoutMs: o.startTimeoutMs ?? envTimeout() ?? DEFAULT_START_TIMEOUT_MS,
    reconnect: reconnect && {
      retries: reconnect.retries ?? 5,
      minDelayMs: reconnect.minDelayMs ?? 250,
      maxDelayMs: reconnect.maxDelayMs ?? 5_000,
    },
    transfer: o.transfer ?? true,
  };
}
