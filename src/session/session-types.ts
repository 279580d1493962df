/**
 * What a bridge session is, as its users see it: the events, the objects both drivers' sessions
 * offer, and the per-driver session types `openSession` hands back (session.ts).
 */
import type { PlaywrightConnection } from 'burrow-sandbox/playwright';
import type { PuppeteerConnection } from 'burrow-sandbox/puppeteer';
import type { ComputerAction, Instance, InstanceStatus, ToolResult } from '../api/index.js';
import type { SessionDownloads, SessionRecording } from './artifacts.js';
import type { SessionAuth } from './auth.js';
import type { DriverConnection, DriverName } from './driver.js';
import type { HandoffOptions, HandoffResult } from './handoff.js';

export type SessionEvents = {
  /** The CDP connection closed without `stop()` or `reconnect()` asking for it. */
  disconnected: [DisconnectedEvent];
  /** `reconnect()` (yours, or the automatic one) re-bound `browser`, `context` and `page`. */
  reconnected: [ReconnectedEvent];
  /** Automatic reconnecting gave up; the session stays open until you `stop()` it. */
  reconnectFailed: [ReconnectFailedEvent];
};

export interface DisconnectedEvent {
  /** What happened, e.g. "the CDP connection closed while instance inst_… is still running". */
  readonly reason: string;
  /** The instance's status right after; `gone` when the server no longer knows it. */
  readonly instanceStatus: InstanceStatus | 'gone' | 'unknown';
  /** Whether automatic reconnecting (option `reconnect`) is about to try. */
  readonly willReconnect: boolean;
  /**
   * Set when the instance ended with the cluster node it ran on (its `end_reason`): `node_lost`
   * when that node died, `node_drained` when it was drained past its deadline.
   */
  readonly endReason?: 'node_lost' | 'node_drained';
}

export interface ReconnectedEvent {
  /** Attempts it took: 1 for a call to `reconnect()`. */
  readonly attempts: number;
}

export interface ReconnectFailedEvent {
  readonly error: unknown;
  readonly attempts: number;
}

/** What `stop()` resolves to. */
export interface StoppedSession {
  readonly instanceId: string;
  /** `gone` when the server did not know the instance any more (a 404 on stop). */
  readonly status: 'terminated' | 'gone';
}

/** What both drivers' sessions offer. */
export interface SessionBase extends AsyncDisposable {
  readonly driver: DriverName;
  /** The instance's id (`instance.id`), as `burrow list` and the API name it. */
  readonly id: string;
  /** The instance record, as it was once running. */
  readonly instance: Instance;
  /** The current `cdp_url`: a `ws://` URL carrying the instance's token; keep it secret. */
  readonly cdpUrl: string;
  /** Whether the driver's CDP connection is open. */
  readonly connected: boolean;
  /** Save, update, apply and list auth states (by id or name). */
  readonly auth: SessionAuth;
  /** The instance's downloads, kept by the server: `list()`, `save(id, path)` (artifacts.ts). */
  readonly downloads: SessionDownloads;
  /** Screen recordings: `start()`, `stop()`, `list()`, `save(id, path)` (artifacts.ts). */
  readonly recording: SessionRecording;
  /** A PNG of the instance's screen (the server's `screenshot`). */
  screenshot(): Promise<Buffer>;
  /** URL of the browser's active tab (the server's `browser/current_url`). */
  currentUrl(): Promise<string>;
  /** URL of the instance's interactive live view (the server's `stream_url`). */
  streamUrl(): Promise<string>;
  /**
   * One mouse, keyboard or screen action on the instance (the server's `computer`), in the
   * coordinates of `screenshot()`. The result's `base64_image` holds a PNG taken after the action
   * unless `screenshot: false`; `get_cursor_position` answers `X=<x>,Y=<y>` in `output`.
   */
  computer(action: ComputerAction): Promise<ToolResult>;
  /**
   * Hands the instance to a person (a login's second factor, a CAPTCHA): a live view with
   * `message` and a Done button behind a token of its own. Its URL goes to `onUrl` (or to
   * stderr); resolves once the person pressed Done, rejects with a `HandoffError`
   * (`handoff_expired`, `handoff_cancelled`) otherwise.
   */
  handoff(options: HandoffOptions): Promise<HandoffResult>;
  /**
   * Sets the instance to expire `hours` from now (0.01–24; the server's `extend`: it replaces
   * the time left, it does not add to it). Resolves to the instance with its new `expires_at`.
   */
  extend(hours: number): Promise<Instance>;
  /**
   * Connects the driver again, to the same instance, and re-binds `browser`, `page` (and
   * `context`); objects taken from the old connection are dead. Concurrent calls share one
   * attempt.
   */
  reconnect(): Promise<void>;
  /**
   * Disconnects the driver (never closing the remote browser), stops the remote browser on
   * `ubuntu`, and stops the instance. Idempotent and safe to call concurrently; an instance the
   * server no longer knows counts as stopped. `await using` calls it.
   */
  stop(): Promise<StoppedSession>;
  on<E extends keyof SessionEvents>(event: E, listener: (...args: SessionEvents[E]) => void): this;
  once<E extends keyof SessionEvents>(
    event: E,
    listener: (...args: SessionEvents[E]) => void,
  ): this;
  off<E extends keyof SessionEvents>(event: E, listener: (...args: SessionEvents[E]) => void): this;
}

/** A session whose driver connection is `C`: `browser` and `page` have the driver's own types. */
export interface DriverSession<
  D extends DriverName,
  C extends DriverConnection,
> extends SessionBase {
  readonly driver: D;
  readonly browser: C['browser'];
  /** The default context's first page. */
  readonly page: C['page'];
}

/** A session driven by Playwright (playwright-core). */
export interface PlaywrightSession extends DriverSession<'playwright', PlaywrightConnection> {
  /** The remote browser's default context, the one applied auth states live in. */
  readonly context: PlaywrightConnection['context'];
}

/** A session driven by Puppeteer (puppeteer-core). */
export type PuppeteerSession = DriverSession<'puppeteer', PuppeteerConnection>;

export type Session = PlaywrightSession | PuppeteerSession;
