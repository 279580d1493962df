/**
 * The context options of a Playwright Test `use` block, combined the way @playwright/test combines
 * them for its own `context` fixture (each option fixture over `contextOptions`), and checked
 * against what a Chromium reached over CDP on a burrow instance can honour. Pure: no driver calls.
 */
import type { BrowserContextOptions } from 'playwright-core';

/** The option fixtures that feed a context, by their `use` names. */
export const CONTEXT_OPTION_NAMES = [
  'acceptDownloads',
  'bypassCSP',
  'clientCertificates',
  'colorScheme',
  'contrast',
  'deviceScaleFactor',
  'extraHTTPHeaders',
  'forcedColors',
  'geolocation',
  'hasTouch',
  'httpCredentials',
  'ignoreHTTPSErrors',
  'isMobile',
  'javaScriptEnabled',
  'locale',
  'offline',
  'permissions',
  'proxy',
  'reducedMotion',
  'screen',
  'serviceWorkers',
  'storageState',
  'timezoneId',
  'userAgent',
  'viewport',
  'baseURL',
] as const satisfies readonly (keyof BrowserContextOptions)[];

export type ContextOptionName = (typeof CONTEXT_OPTION_NAMES)[number];

/** The `use` values this module reads: the option fixtures plus `contextOptions`. */
export type UseContextOptions = {
  [K in ContextOptionName]: BrowserContextOptions[K] | undefined;
} & {
  contextOptions: BrowserContextOptions;
};

/**
 * Options the remote browser cannot honour, and why. Everything else Playwright documents for
 * `browser.newContext` works over CDP (emulation, permissions, storage, headers, HAR, timeouts).
 */
const UNSUPPORTED: Partial<
  Record<keyof BrowserContextOptions | 'videosPath' | 'videoSize', string>
> = {
  clientCertificates:
    'Playwright serves client certificates through a proxy on this machine, which the remote browser cannot reach',
  recordVideo:
    "Playwright's video needs its own ffmpeg on this machine; use the `video` option (recorded by the instance with defaultContext: true)",
  videosPath: 'see recordVideo',
  videoSize: 'see recordVideo',
};

/** Playwright Test's defaults for the option fixtures that have one (its own fixture table). */
const DEFAULTS: Partial<Record<ContextOptionName, unknown>> = {
  acceptDownloads: true,
  bypassCSP: false,
  colorScheme: 'light',
  contrast: 'no-preference',
  forcedColors: 'none',
  hasTouch: false,
  ignoreHTTPSErrors: false,
  isMobile: false,
  javaScriptEnabled: true,
  locale: 'en-US',
  offline: false,
  reducedMotion: 'no-preference',
  serviceWorkers: 'allow',
  viewport: { width: 1280, height: 720 },
};

/** An option in `use` the remote browser cannot honour in the way the test asked. */
export class UnsupportedOptionError extends Error {
  override readonly name = 'UnsupportedOptionError';
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`burrow-sandbox/playwright-test: option "${option}" is not supported: ${reason}`);
  }
}

/** `contextOptions` with every option fixture that is set over it, as Playwright Test does. */
export function combineContextOptions(use: UseContextOptions): BrowserContextOptions {
  const options: Record<string, unknown> = {};
  for (const name of CONTEXT_OPTION_NAMES) {
    const value = use[name];
    if (value === undefined) continue;
    if (name === 'clientCertificates' && Array.isArray(value) && value.length === 0) continue;
    options[name] = value;
  }
  return { ...use.contextOptions, ...options } as BrowserContextOptions;
}

/**
 * Whether two `proxy` options name the same upstream with the same credentials and bypass list
 * (both unset counts as the same).
 */
type ProxyOption = {
  server: string;
  username?: string | undefined;
  password?: string | undefined;
  bypass?: string | undefined;
};

export function sameProxy(a: ProxyOption | undefined, b: ProxyOption | undefined): boolean {
  const key = (p: ProxyOption | undefined) =>
    p === undefined
      ? ''
      : JSON.stringify([p.server.trim(), p.username ?? '', p.password ?? '', p.bypass ?? '']);
  return key(a) === key(b);
}

/**
 * The options for a fresh context; throws `UnsupportedOptionError` naming the first it cannot
 * honour. `proxy` is not a context option here: the session behind the test was started with it
 * (its instance's egress chains to it), so the context goes through it without one of its own.
 */
export function isolatedContextOptions(use: UseContextOptions): BrowserContextOptions {
  const { proxy: _carriedBySession, ...options } = combineContextOptions(use);
  for (const [name, value] of Object.entries(options)) {
    const reason = UNSUPPORTED[name as keyof typeof UNSUPPORTED];
    if (reason !== undefined && value !== undefined) throw new UnsupportedOptionError(name, reason);
  }
  return options;
}

/**
 * With `defaultContext: true` the context already exists, so no option can shape it: throws for
 * the first one set to anything but Playwright Test's default (for `baseURL`: `''`).
 */
export function checkDefaultContextOptions(use: UseContextOptions): void {
  const { proxy: _carriedBySession, ...options } = combineContextOptions(use);
  for (const [name, value] of Object.entries(options)) {
    if (value === undefined) continue;
    if (name === 'baseURL') {
      if (value === '') continue; // Playwright's "no base URL"
      throw new UnsupportedOptionError(
        'baseURL',
        "the instance's default context was created without it, and Playwright resolves relative URLs in the context: set baseURL: '' for these tests and navigate to absolute URLs",
      );
    }
    const fallback = DEFAULTS[name as ContextOptionName];
    if (fallback !== undefined && JSON.stringify(fallback) === JSON.stringify(value)) continue;
    throw new UnsupportedOptionError(
      name,
      "with defaultContext: true the test runs in the instance's existing default context, which options cannot reshape (drop defaultContext for a fresh context built from them)",
    );
  }
}

/** The worker options that choose or launch a browser, which a remote instance decides instead. */
export interface UseWorkerOptions {
  browserName: string;
  channel: string | undefined;
  headless: boolean;
  launchOptions: object;
  connectOptions: unknown;
}

/** Throws `UnsupportedOptionError` for a worker option that asks for another browser or launch. */
export function checkWorkerOptions(use: UseWorkerOptions): void {
  if (use.browserName !== 'chromium') {
    throw new UnsupportedOptionError(
      'browserName',
      `burrow instances run Chromium, not "${use.browserName}"`,
    );
  }
  if (use.channel !== undefined) {
    throw new UnsupportedOptionError('channel', "the instance's Chromium is the server's");
  }
  // `headless: false` (`--headed`) is honoured by showing the instance's live view (headed.ts)
  const launch = Object.keys(use.launchOptions).filter((k) => k !== 'headless');
  if (launch.length > 0) {
    throw new UnsupportedOptionError(
      `launchOptions.${launch[0]!}`,
      'the instance launches its own browser; pass instance settings in sessionOptions',
    );
  }
  if (use.connectOptions !== undefined) {
    throw new UnsupportedOptionError(
      'connectOptions',
      'the browser is the burrow instance; point BURROW_BASE_URL (or sessionOptions.baseUrl) at another server instead',
    );
  }
}

export type VideoMode =
  | 'off'
  | 'on'
  | 'retain-on-failure'
  | 'on-first-retry'
  | 'on-all-retries'
  | 'retain-on-first-failure'
  | 'retain-on-failure-and-retries';

/** The `video` option's mode, as Playwright Test reads it. */
export function videoMode(video: unknown): VideoMode {
  if (!video) return 'off';
  const mode = typeof video === 'string' ? video : (video as { mode: string }).mode;
  return (mode === 'retry-with-video' ? 'on-first-retry' : mode) as VideoMode;
}

/** Whether a test in its `retry` should be recorded (Playwright Test's rule). */
export function shouldRecord(mode: VideoMode, retry: number): boolean {
  switch (mode) {
    case 'on':
    case 'retain-on-failure':
    case 'retain-on-failure-and-retries':
      return true;
    case 'on-first-retry':
      return retry === 1;
    case 'on-all-retries':
      return retry > 0;
    case 'retain-on-first-failure':
      return retry === 0;
    case 'off':
      return false;
  }
}

/** Whether a recorded test keeps its clip (Playwright Test's rule). */
export function shouldKeepVideo(mode: VideoMode, failed: boolean, retry: number): boolean {
  switch (mode) {
    case 'on':
    case 'on-first-retry':
    case 'on-all-retries':
      return true;
    case 'retain-on-failure':
    case 'retain-on-first-failure':
      return failed;
    case 'retain-on-failure-and-retries':
      return failed || retry > 0;
    case 'off':
      return false;
  }
}

/** Whether Playwright Test's own `screenshot` option already captures this test's pages. */
export function playwrightScreenshots(
  screenshot: unknown,
  failed: boolean,
  retry: number,
): boolean {
  const mode = !screenshot
    ? 'off'
    : typeof screenshot === 'string'
      ? screenshot
      : (screenshot as { mode: string }).mode;
  return (
    mode === 'on' ||
    (mode === 'only-on-failure' && failed) ||
    (mode === 'on-first-failure' && failed && retry === 0)
  );
}
