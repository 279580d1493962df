/**
 * The bridge core: open → wait → connect → use → stop (docs/architecture.md). `openSession` hands
 * back only a fully open session; anything that fails after the instance exists stops it again.
 * The steps are here; what they use is beside it: the peer, driver and API to reach
 * (endpoint.ts), what a session holds and gives back once (lease.ts), the open session itself
 * (bridge-session.ts) and its public types (session-types.ts).
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Instance } from '../api/index.js';
import { BurrowError, RateLimitError, type Burrow } from '../client/index.js';
import { debug, debugEnabled } from '../client/debug.js';
import { findAuthState } from './auth.js';
import { BridgeSession } from './bridge-session.js';
import type { DriverConnection } from './driver.js';
import { checkPeer, drivers, openEndpoint, unlessAborted } from './endpoint.js';
import { SessionStartError, SessionStoppedError, withCleanupError } from './errors.js';
import { connectDetached } from './keepalive.js';
import { Lease } from './lease.js';
import { Ledger } from './ledger.js';
import { resolveOptions, type OpenSessionOptions } from './options.js';
import { reapOrphans } from './reaper.js';
import type { PlaywrightSession, PuppeteerSession, Session } from './session-types.js';
import { connectDriver, transferSetup } from './transfer.js';

/** First and longest pause between status polls while the instance deploys. */
const POLL_MIN_MS = 100;
const POLL_MAX_MS = 2_000;

/**
 * Starts an instance, waits until it is `running`, connects the driver to its browser, applies
 * `authState` if given, and returns the live session. Stop it with `await using` or `stop()`.
 *
 * ```ts
 * await using session = await openSession({ authState: 'github' });
 * await session.page.goto('https://example.com');
 * ```
 */
export function openSession(
  options: OpenSessionOptions & { driver: 'puppeteer' },
): Promise<PuppeteerSession>;
export function openSession(
  options?: OpenSessionOptions & { driver?: 'playwright' },
): Promise<PlaywrightSession>;
export function openSession(options?: OpenSessionOptions): Promise<Session>;
export async function openSession(options: OpenSessionOptions = {}): Promise<Session> {
  const opts = resolveOptions(options);
  // a missing peer fails here, before the server or an instance exists
  await checkPeer(opts.driver);
  const endpoint = await openEndpoint(opts.endpoint);
  const { client } = endpoint;
  const ledger = new Ledger();
  const t0 = performance.now();
  const since = () => `${Math.round(performance.now() - t0)}ms`;
  const deadline = AbortSignal.timeout(opts.startTimeoutMs);
  let signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  let lease: Lease | undefined;
  let step = 'looking up the auth state';
  try {
    await reapOrphans({ client }).catch(() => undefined); // best effort; never blocks opening
    // an unknown or ambiguous auth state fails before an instance is started
    const state =
      opts.authState === undefined
        ? undefined
        : await findAuthState(client, opts.authState, { signal });
    step = 'starting the instance';
    debug('session', `${step} (${opts.instanceType}) on ${endpoint.baseUrl}`);
    lease = new Lease(endpoint, ledger, opts.start, signal);
    signal = AbortSignal.any([signal, lease.signal]);
    const instance = await unlessAborted(lease.started, signal, () => undefined);

    step = 'waiting until the instance is running';
    debug('session', `${instance.id}: ${step} (${since()})`);
    const running = await waitUntilRunning(client, instance, signal);
    step = 'getting the cdp_url';
    let cdpUrl: string;
    if (opts.instanceType === 'ubuntu') {
      lease.browserStarted = true;
      cdpUrl = (await client.browser.start(instance.id, { signal })).cdp_url;
    } else {
      cdpUrl = (await client.browser.cdpUrl(instance.id, { signal })).cdp_url;
    }
    step = `connecting ${opts.driver}`;
    debug('session', `${instance.id}: ${step} (${since()})`);
    const driver = await drivers[opts.driver]();
    const timeoutMs = Math.max(1, Math.round(opts.startTimeoutMs - (performance.now() - t0)));
    if (opts.transfer) lease.transfer = transferSetup(client, instance.id, opts.driver);
    // the driver's socket does not hold the process by itself; the lease's keeper does (keepalive.ts)
    const transfer = lease.transfer;
    const connecting = connectDetached(() =>
      connectDriver(driver, cdpUrl, { timeoutMs }, transfer),
    );
    const conn = await unlessAborted(connecting, signal, (late) => late.disconnect());
    lease.conn = conn;
    if (state !== undefined) {
      step = `applying auth state "${opts.authState}"`;
      debug('session', `${instance.id}: ${step} (${since()})`);
      await client.browser.authenticate(instance.id, { auth_state_id: state.id }, { signal });
    }
    // the ledger entry (an fsync'd file, ledger.ts) was begun as the start answered, as before;
    // only the wait for it moved here, off the way to a connected driver (a crash leaves the same
    // entry behind as it did), and the session is handed out once it is there
    step = 'recording the instance in the ledger';
    await lease.recorded;
    const session = new BridgeSession(
      opts.driver,
      running,
      lease as Lease & { conn: DriverConnection },
      cdpUrl,
      opts.reconnect,
    );
    if (debugEnabled('session')) {
      const live = await client.instance.streamUrl(instance.id, { signal }).then(
        (r) => r.stream_url,
        (err: unknown) => `unavailable (${(err as Error).message})`,
      );
      debug('session', `${instance.id}: open in ${since()}; live view: ${live}`);
    }
    return session as Session; // the overloads pick the driver from the options
  } catch (error) {
    let primary = error;
    if (lease?.signal.aborted && !opts.signal?.aborted) {
      primary = new SessionStoppedError(`openSession (while ${step})`);
    } else if (deadline.aborted && !opts.signal?.aborted) {
      const startError = await lease?.started.then(
        () => undefined,
        (e: unknown) => e,
      );
      const atCapacity = startError instanceof RateLimitError;
      primary = new SessionStartError(
        'start_timeout',
        (await lease?.started.catch(() => undefined))?.id,
        `The session did not open within ${opts.startTimeoutMs} ms (while ${step}${atCapacity ? ': the server stayed at its instance cap' : ''})`,
        { cause: atCapacity ? startError : error },
      );
    } else if (!(error instanceof BurrowError)) {
      // the driver's own failure (Playwright, Puppeteer) while connecting
      primary = new SessionStartError(
        'start_failed',
        (await lease?.started.catch(() => undefined))?.id,
        `openSession failed while ${step}: ${(error as Error | undefined)?.message ?? String(error)}`,
        { cause: error },
      );
    }
    debug(
      'session',
      `openSession failed while ${step} (${since()}): ${(primary as Error).message}`,
    );
    if (!lease) {
      await endpoint.release();
      throw primary;
    }
    // Stops the instance (once the start answered, if it was still under way).
    const secondary = await lease.stop().then(
      () => undefined,
      (err: unknown) => err,
    );
    throw withCleanupError(primary, secondary);
  }
}

/** Polls until the instance is `running`; a `terminated` or `error` one will never be. */
async function waitUntilRunning(
  client: Burrow,
  instance: Instance,
  signal: AbortSignal,
): Promise<Instance> {
  let current = instance;
  let delay = POLL_MIN_MS;
  while (current.status !== 'running') {
    if (current.status === 'terminated' || current.status === 'error') {
      throw new SessionStartError(
        'start_failed',
        instance.id,
        `Instance ${instance.id} is ${current.status} instead of running`,
      );
    }
    await sleep(delay, undefined, { signal });
    delay = Math.min(POLL_MAX_MS, delay * 2);
    current = await client.instances.get(instance.id, { signal });
  }
  return current;
}
