/** openSession's options: validated before any request, defaults and environment variables. */
import type { BrowserContext, Page as PlaywrightPage } from 'playwright-core';
import type { Page as PuppeteerPage } from 'puppeteer-core';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { Burrow, ConfigurationError } from '../../src/client/index.js';
import { openSession } from '../../src/session/index.js';
import { resolveOptions } from '../../src/session/options.js';

const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
});
const clean = () => {
  delete process.env.BURROW_BASE_URL;
  delete process.env.BURROW_API_KEY;
  delete process.env.BURROW_START_TIMEOUT_MS;
};

describe('resolveOptions', () => {
  it('defaults: Playwright, a browser instance, the embedded server, 120 s to open, no reconnect, files transferred', () => {
    clean();
    expect(resolveOptions()).toEqual({
      driver: 'playwright',
      instanceType: 'browser',
      start: { instance_type: 'browser' },
      authState: undefined,
      endpoint: { kind: 'embedded' },
      signal: undefined,
      startTimeoutMs: 120_000,
      reconnect: undefined,
      transfer: true,
    });
  });

  it('maps the instance options to the start request, in wire names', () => {
    expect(
      resolveOptions({
        instanceType: 'ubuntu',
        timeoutHours: 0.5,
        resolution: [1280, 720],
        blockedDomains: ['ads.test'],
      }).start,
    ).toEqual({
      instance_type: 'ubuntu',
      timeout_hours: 0.5,
      resolution: [1280, 720],
      blocked_domains: ['ads.test'],
    });
  });

  it('endpoint: client, else baseUrl option, else BURROW_BASE_URL, else embedded', () => {
    clean();
    process.env.BURROW_BASE_URL = 'http://env.test:1';
    expect(resolveOptions().endpoint).toEqual({
      kind: 'remote',
      baseUrl: 'http://env.test:1',
      apiKey: undefined,
    });
    expect(resolveOptions({ baseUrl: 'https://opt.test', apiKey: 'k' }).endpoint).toEqual({
      kind: 'remote',
      baseUrl: 'https://opt.test',
      apiKey: 'k',
    });
    const client = new Burrow({ baseUrl: 'http://c.test', apiKey: 'key-12345' });
    expect(resolveOptions({ client }).endpoint).toEqual({ kind: 'client', client });
    process.env.BURROW_BASE_URL = '';
    expect(resolveOptions({ apiKey: 'k' }).endpoint).toEqual({ kind: 'embedded' });
  });

  it('reconnect: true means 5 retries from 250 ms up to 5 s; an object overrides parts', () => {
    expect(resolveOptions({ reconnect: true }).reconnect).toEqual({
      retries: 5,
      minDelayMs: 250,
      maxDelayMs: 5_000,
    });
    expect(resolveOptions({ reconnect: { retries: 2 } }).reconnect).toEqual({
      retries: 2,
      minDelayMs: 250,
      maxDelayMs: 5_000,
    });
    expect(resolveOptions({ reconnect: false }).reconnect).toBeUndefined();
  });

  it('startTimeoutMs: option, else BURROW_START_TIMEOUT_MS, which must be valid', () => {
    clean();
    process.env.BURROW_START_TIMEOUT_MS = '5000';
    expect(resolveOptions().startTimeoutMs).toBe(5000);
    expect(resolveOptions({ startTimeoutMs: 7 }).startTimeoutMs).toBe(7);
    process.env.BURROW_START_TIMEOUT_MS = 'soon';
    expect(() => resolveOptions()).toThrow(
      'BURROW_START_TIMEOUT_MS must be a positive integer of milliseconds, not "soon"',
    );
  });

  it.each([
    [{ driver: 'selenium' }, 'driver'],
    [{ instanceType: 'windows' }, 'instanceType'],
    [{ timeoutHours: 0 }, 'timeoutHours'],
    [{ timeoutHours: 24.5 }, 'timeoutHours'],
    [{ resolution: [1024] }, 'resolution'],
    [{ blockedDomains: ['https://x.test/'] }, 'blockedDomains.0'],
    [{ authState: '' }, 'authState'],
    [{ baseUrl: 'not a url' }, 'baseUrl'],
    [{ startTimeoutMs: 1.5 }, 'startTimeoutMs'],
    [{ reconnect: { retries: -1 } }, 'reconnect'],
    [{ signal: 'stop' }, 'signal'],
    [{ client: {} }, 'client'],
    [
      {
        client: new Burrow({ baseUrl: 'http://c.test', apiKey: 'key-12345' }),
        baseUrl: 'http://x.test',
      },
      'client',
    ],
    [{ headless: true }, '(options)'],
  ])('rejects %j, naming %s', (options, field) => {
    const error = (() => {
      try {
        resolveOptions(options as never);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error).toMatchObject({ code: 'invalid_option' });
    expect((error as Error).message).toMatch(
      new RegExp(`^openSession: .*${field.replace(/[().]/g, '\\$&')}`),
    );
  });
});

describe('openSession types', () => {
  it('driver puppeteer gives Puppeteer types; the default gives Playwright types', () => {
    // Type-checked by tsc, never called: it would open sessions.
    const typed = async () => {
      const pw = await openSession();
      expectTypeOf(pw.page).toEqualTypeOf<PlaywrightPage>();
      expectTypeOf(pw.context).toEqualTypeOf<BrowserContext>();
      const pp = await openSession({ driver: 'puppeteer' });
      expectTypeOf(pp.page).toEqualTypeOf<PuppeteerPage>();
      // @ts-expect-error a Puppeteer session has no Playwright context
      void pp.context;
      const either = await openSession({
        driver: Math.random() > 0.5 ? 'playwright' : 'puppeteer',
      });
      if (either.driver === 'puppeteer') expectTypeOf(either.page).toEqualTypeOf<PuppeteerPage>();
    };
    expect(typeof typed).toBe('function');
  });
});
