/**
 * adapters/playwright-test/options.ts: `use` options combine as Playwright Test combines them, and
 * what a remote Chromium cannot honour is an error naming the option.
 */
import { describe, expect, it } from 'vitest';
import {
  checkDefaultContextOptions,
  checkWorkerOptions,
  combineContextOptions,
  isolatedContextOptions,
  playwrightScreenshots,
  shouldKeepVideo,
  shouldRecord,
  sameProxy,
  UnsupportedOptionError,
  videoMode,
  type UseContextOptions,
} from '../../adapters/playwright-test/options.js';

/** Playwright Test's values when a config sets nothing (its option fixtures' defaults). */
const defaults: UseContextOptions = {
  contextOptions: {},
  acceptDownloads: true,
  bypassCSP: false,
  clientCertificates: undefined,
  colorScheme: 'light',
  contrast: 'no-preference',
  deviceScaleFactor: undefined,
  extraHTTPHeaders: undefined,
  forcedColors: 'none',
  geolocation: undefined,
  hasTouch: false,
  httpCredentials: undefined,
  ignoreHTTPSErrors: false,
  isMobile: false,
  javaScriptEnabled: true,
  locale: 'en-US',
  offline: false,
  permissions: undefined,
  proxy: undefined,
  reducedMotion: 'no-preference',
  screen: undefined,
  serviceWorkers: 'allow',
  storageState: undefined,
  timezoneId: undefined,
  userAgent: undefined,
  viewport: { width: 1280, height: 720 },
  baseURL: undefined,
};

const worker = {
  browserName: 'chromium',
  channel: undefined,
  headless: true,
  launchOptions: {},
  connectOptions: undefined,
};

const errorOf = (f: () => unknown): UnsupportedOptionError => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(UnsupportedOptionError);
    return err as UnsupportedOptionError;
  }
  throw new Error('no error');
};

describe('combineContextOptions', () => {
  it('puts each set option fixture over contextOptions, leaving unset ones out', () => {
    const options = combineContextOptions({
      ...defaults,
      contextOptions: { locale: 'fr-FR', strictSelectors: true, timezoneId: 'UTC' },
      locale: 'de-DE',
      baseURL: 'http://127.0.0.1:1',
      clientCertificates: [],
    });
    expect(options).toMatchObject({
      locale: 'de-DE',
      strictSelectors: true,
      timezoneId: 'UTC',
      baseURL: 'http://127.0.0.1:1',
    });
    expect(Object.keys(options)).not.toContain('clientCertificates');
    expect(Object.keys(options)).not.toContain('proxy');
  });
});

describe('isolatedContextOptions', () => {
  it('passes what a CDP-connected Chromium supports', () => {
    const use = {
      ...defaults,
      storageState: { cookies: [], origins: [] },
      geolocation: { latitude: 1, longitude: 2 },
      permissions: ['geolocation'],
      httpCredentials: { username: 'u', password: 'p' },
      offline: true,
      extraHTTPHeaders: { 'x-a': '1' },
    };
    expect(isolatedContextOptions(use)).toEqual(combineContextOptions(use));
  });

  it('leaves proxy to the session (its instance is started with it), in use or contextOptions', () => {
    for (const patch of [
      { proxy: { server: 'http://127.0.0.1:9' } },
      { contextOptions: { proxy: { server: 'socks5://127.0.0.1:9' } } },
    ]) {
      const options = isolatedContextOptions({ ...defaults, locale: 'de-DE', ...patch });
      expect(Object.keys(options)).not.toContain('proxy');
      expect(options.locale).toBe('de-DE');
      expect(() => checkDefaultContextOptions({ ...defaults, ...patch })).not.toThrow();
    }
  });

  it('sameProxy compares server, credentials and bypass', () => {
    const a = { server: 'http://127.0.0.1:9', username: 'u', password: 'p' };
    expect(sameProxy(undefined, undefined)).toBe(true);
    expect(sameProxy(a, { ...a })).toBe(true);
    expect(sameProxy(a, undefined)).toBe(false);
    expect(sameProxy(a, { ...a, password: 'q' })).toBe(false);
    expect(sameProxy(a, { ...a, bypass: 'x.test' })).toBe(false);
  });

  it.each([
    ['clientCertificates', { clientCertificates: [{ origin: 'https://a', pfxPath: 'x.pfx' }] }],
    ['recordVideo', { contextOptions: { recordVideo: { dir: '/tmp' } } }],
  ])('refuses %s, naming it', (name, patch) => {
    const err = errorOf(() => isolatedContextOptions({ ...defaults, ...patch }));
    expect(err.option).toBe(name);
    expect(err.message).toContain(`option "${name}" is not supported`);
  });
});

describe('checkDefaultContextOptions', () => {
  it("accepts Playwright Test's defaults and baseURL ''", () => {
    expect(() => checkDefaultContextOptions(defaults)).not.toThrow();
    expect(() => checkDefaultContextOptions({ ...defaults, baseURL: '' })).not.toThrow();
  });

  it.each([
    ['locale', { locale: 'fr-FR' }],
    ['viewport', { viewport: { width: 800, height: 600 } }],
    ['storageState', { storageState: { cookies: [], origins: [] } }],
    ['baseURL', { baseURL: 'http://127.0.0.1:1' }],
    ['userAgent', { contextOptions: { userAgent: 'x' } }],
  ])('refuses %s, naming it', (name, patch) => {
    expect(errorOf(() => checkDefaultContextOptions({ ...defaults, ...patch })).option).toBe(name);
  });
});

describe('checkWorkerOptions', () => {
  it('accepts the defaults', () => {
    expect(() => checkWorkerOptions(worker)).not.toThrow();
    expect(() =>
      checkWorkerOptions({ ...worker, launchOptions: { headless: true } }),
    ).not.toThrow();
    // --headed shows the instance's live view instead (headed.ts)
    expect(() => checkWorkerOptions({ ...worker, headless: false })).not.toThrow();
  });

  it.each([
    ['browserName', { browserName: 'firefox' }],
    ['channel', { channel: 'chrome' }],
    ['launchOptions.args', { launchOptions: { args: ['--x'] } }],
    ['connectOptions', { connectOptions: { wsEndpoint: 'ws://x' } }],
  ])('refuses %s, naming it', (name, patch) => {
    expect(errorOf(() => checkWorkerOptions({ ...worker, ...patch })).option).toBe(name);
  });
});

describe('video and screenshot modes, as Playwright Test reads them', () => {
  it('records and keeps by mode, retry and outcome', () => {
    expect(videoMode(undefined)).toBe('off');
    expect(videoMode({ mode: 'retry-with-video' })).toBe('on-first-retry');
    expect(shouldRecord('retain-on-failure', 0)).toBe(true);
    expect(shouldRecord('on-first-retry', 0)).toBe(false);
    expect(shouldRecord('on-first-retry', 1)).toBe(true);
    expect(shouldKeepVideo('retain-on-failure', false, 0)).toBe(false);
    expect(shouldKeepVideo('retain-on-failure', true, 0)).toBe(true);
    expect(shouldKeepVideo('on', false, 0)).toBe(true);
  });

  it("knows when Playwright's own screenshot option captures", () => {
    expect(playwrightScreenshots('off', true, 0)).toBe(false);
    expect(playwrightScreenshots(undefined, true, 0)).toBe(false);
    expect(playwrightScreenshots('only-on-failure', true, 0)).toBe(true);
    expect(playwrightScreenshots({ mode: 'on' }, false, 0)).toBe(true);
    expect(playwrightScreenshots('on-first-failure', true, 1)).toBe(false);
  });
});
