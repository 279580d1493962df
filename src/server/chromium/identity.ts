/**
 * Device and identity of a browser instance (start options `device`, `user_agent`, `locale`,
 * `timezone_id`, `geolocation`; src/api/identity.ts), applied to every page of every browser
 * context, the ones a `cdp_url` client creates included.
 *
 * The server's own session auto-attaches to every target with `waitForDebuggerOnStart`: a new
 * page waits until this session has set its overrides and let it run (Chromium also waits for
 * every client that auto-attaches the same way), so the page's first script already sees them.
 * The session stays attached for the page's life, since Chromium drops a session's overrides when
 * it detaches. A client that sets its own overrides on its session (Playwright's `newContext({
 * viewport })`) does so later, and its values win for its pages.
 *
 * What is set per page: `Emulation.setDeviceMetricsOverride` (viewport, screen, scale, mobile),
 * `Emulation.setTouchEmulationEnabled` (`navigator.maxTouchPoints`, `(pointer: coarse)`),
 * `Emulation.setUserAgentOverride` with `acceptLanguage`, `platform` and `userAgentMetadata` (so
 * `navigator.userAgentData` and the `Sec-CH-UA*` headers tell the same story as the user agent),
 * `Emulation.setLocaleOverride`, `Emulation.setTimezoneOverride`,
 * `Emulation.setGeolocationOverride`; once per context `Browser.grantPermissions` (geolocation).
 * `navigator.platform` is also set by a script on every new document, since Chromium forgets the
 * override's `platform` when a page moves to another renderer process.
 * Other targets (workers) are let run and left alone; a client's browser session, which Chromium
 * reports to the auto-attach as well, is not touched.
 */
import type { BrowserIdentity } from '../../api/identity.js';
import type { CdpConnection } from './cdp.js';
import type { CdpParams } from './transport.js';

interface AttachedTarget {
  type: string;
  targetId: string;
  browserContextId?: string;
}

/** `navigator.platform` and the client hints' platform of a user agent. */
function platformOf(ua: string): { navigator: string; hint: string; version: string } {
  const android = /Android ([\d.]+)/.exec(ua);
  if (android) return { navigator: 'Linux armv81', hint: 'Android', version: android[1]! };
  if (/iPad/.test(ua)) return { navigator: 'iPad', hint: 'iOS', version: '' };
  if (/iPhone/.test(ua)) return { navigator: 'iPhone', hint: 'iOS', version: '' };
  const win = /Windows NT ([\d.]+)/.exec(ua);
  if (win) return { navigator: 'Win32', hint: 'Windows', version: win[1]! };
  if (/Macintosh|Mac OS X/.test(ua)) return { navigator: 'MacIntel', hint: 'macOS', version: '' };
  return { navigator: 'Linux x86_64', hint: 'Linux', version: '' };
}

/**
 * The user agent's client-hint metadata: Chromium brands from a Chrome-like user agent's version,
 * or none for another browser's (Safari's or Firefox's send no client hints).
 */
function metadataOf(ua: string, mobile: boolean): CdpParams | undefined {
  const chrome = /(?:Chrome|CriOS|HeadlessChrome)\/(\d+)(\.[\d.]+)?/.exec(ua);
  if (!chrome) return undefined;
  const major = chrome[1]!;
  const full = `${major}${chrome[2] ?? '.0.0.0'}`;
  const platform = platformOf(ua);
  const model = /Android [\d.]+; ([^;)]+)/.exec(ua)?.[1]?.trim() ?? '';
  const brands = [
    { brand: 'Chromium', version: major },
    { brand: 'Not_A Brand', version: '24' },
  ];
  return {
    brands,
    fullVersionList: brands.map((b) => ({
      brand: b.brand,
      version: b.brand === 'Chromium' ? full : '24.0.0.0',
    })),
    fullVersion: full,
    platform: platform.hint,
    platformVersion: platform.version,
    architecture: platform.hint === 'Android' ? '' : 'x86',
    model: platform.hint === 'Android' ? model : '',
    mobile,
  };
}

export class IdentityOverrides {
  readonly #identity: BrowserIdentity;
  readonly #granted = new Set<string>();
  #cdp: CdpConnection | undefined;
  /** Chromium's own user agent: the base when only the locale is set. */
  #defaultUserAgent = '';
  /** Page target id → this server's session of it. */
  readonly #sessions = new Map<string, string>();

  constructor(identity: BrowserIdentity) {
    this.#identity = identity;
  }

  /** This server's session of a page, attached by the auto-attach. */
  sessionOf(targetId: string): string | undefined {
    return this.#sessions.get(targetId);
  }

  /** Auto-attach to every target (the server's root session): existing pages get it now. */
  async start(cdp: CdpConnection): Promise<void> {
    this.#cdp = cdp;
    const { userAgent } = await cdp.send<{ userAgent: string }>('Browser.getVersion');
    this.#defaultUserAgent = userAgent.replace('HeadlessChrome/', 'Chrome/');
    cdp.on('Target.attachedToTarget', (p, sessionId) => {
      if (sessionId !== undefined) return; // a session's own auto-attach (a client's)
      const waiting = p.waitingForDebugger === true;
      void this.#attached(p.targetInfo as AttachedTarget, p.sessionId as string, waiting);
    });
    cdp.on('Target.detachedFromTarget', (p, sessionId) => {
      if (sessionId !== undefined) return;
      for (const [targetId, id] of this.#sessions) {
        if (id === p.sessionId) this.#sessions.delete(targetId);
      }
    });
    await cdp.send('Target.setAutoAttach', {
      autoAttach: true,
      waitForDebuggerOnStart: true,
      flatten: true,
    });
  }

  async #attached(target: AttachedTarget, sessionId: string, waiting: boolean): Promise<void> {
    const cdp = this.#cdp;
    if (!cdp) return;
    const send = (method: string, params: CdpParams = {}) =>
      cdp.send(method, params, sessionId).catch(() => undefined);
    if (target.type !== 'page') {
      // a client's own browser session is reported here too: it is not ours to touch
      if (waiting && target.type !== 'browser') await send('Runtime.runIfWaitingForDebugger');
      return;
    }
    this.#sessions.set(target.targetId, sessionId);
    const { device, locale, timezoneId, geolocation } = this.#identity;
    const steps: Promise<unknown>[] = [];
    if (device) {
      const { viewport, screen = viewport } = device;
      steps.push(
        send('Emulation.setDeviceMetricsOverride', {
          width: viewport.width,
          height: viewport.height,
          deviceScaleFactor: device.deviceScaleFactor,
          mobile: device.isMobile,
          screenWidth: screen.width,
          screenHeight: screen.height,
        }),
      );
      if (device.hasTouch) {
        steps.push(
          send('Emulation.setTouchEmulationEnabled', { enabled: true, maxTouchPoints: 5 }),
        );
      }
    }
    const userAgent = this.#identity.userAgent ?? device?.userAgent;
    if (userAgent !== undefined || locale !== undefined) {
      const ua = userAgent ?? this.#defaultUserAgent;
      const metadata = metadataOf(ua, device?.isMobile ?? /Mobile/.test(ua));
      steps.push(
        send('Emulation.setUserAgentOverride', {
          userAgent: ua,
          platform: platformOf(ua).navigator,
          ...(locale !== undefined && { acceptLanguage: locale }),
          ...(metadata && { userAgentMetadata: metadata }),
        }),
      );
    }
    if (userAgent !== undefined) {
      // Chromium keeps the override's `platform` only until the page's first navigation to
      // another renderer process (the user agent itself holds): every new document gets it from
      // a script of this session, which runs only with the Page domain enabled here.
      const platform = JSON.stringify(platformOf(userAgent).navigator);
      steps.push(send('Page.enable'));
      steps.push(
        send('Page.addScriptToEvaluateOnNewDocument', {
          source: `Object.defineProperty(Navigator.prototype, 'platform', { get: () => ${platform}, configurable: true });`,
        }),
      );
    }
    if (locale !== undefined) steps.push(send('Emulation.setLocaleOverride', { locale }));
    if (timezoneId !== undefined) {
      steps.push(send('Emulation.setTimezoneOverride', { timezoneId }));
    }
    if (geolocation) {
      steps.push(
        send('Emulation.setGeolocationOverride', {
          latitude: geolocation.latitude,
          longitude: geolocation.longitude,
          accuracy: geolocation.accuracy ?? 0,
        }),
      );
      const context = target.browserContextId;
      if (context !== undefined && !this.#granted.has(context)) {
        this.#granted.add(context);
        steps.push(
          cdp
            .send('Browser.grantPermissions', {
              permissions: ['geolocation'],
              browserContextId: context,
            })
            .catch(() => this.#granted.delete(context)),
        );
      }
    }
    await Promise.all(steps);
    await send('Runtime.runIfWaitingForDebugger');
  }
}
