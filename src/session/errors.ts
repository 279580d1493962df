/**
 * Errors of the bridge. Client errors (`BurrowError` and its subclasses) pass through unchanged;
 * these cover what only a session can get wrong. Invalid options are the client's
 * `ConfigurationError` (`code: 'invalid_option'`), thrown before any request.
 */

import { BurrowError } from '../client/index.js';
import { SESSION_ERROR_CODES } from '../client/errors.js';

export { SESSION_ERROR_CODES };
export type SessionErrorCode = (typeof SESSION_ERROR_CODES)[number];

/** Base class of the bridge's own errors: a `BurrowError`, so one `instanceof` catches all. */
export class SessionError extends BurrowError {
  declare readonly code: SessionErrorCode;

  constructor(code: SessionErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

/** An optional peer dependency (playwright-core, puppeteer-core, @playwright/test) is not installed. */
export class PeerDependencyError extends SessionError {
  declare readonly code: 'peer_missing';

  constructor(
    /** The npm package to install, e.g. `playwright-core`. */
    readonly packageName: string,
    /** The entry point that needs it, e.g. `burrow-sandbox/playwright`. */
    readonly neededBy: string,
    options?: ErrorOptions,
  ) {
    super(
      'peer_missing',
      `${neededBy} needs the optional peer dependency "${packageName}", which is not installed: run \`npm install ${packageName}\``,
      options,
    );
  }

  /** Load a peer with `load`, turning "module not found" for `packageName` into this error. */
  static async load<T>(packageName: string, neededBy: string, load: () => Promise<T>): Promise<T> {
    try {
      return await load();
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      const notFound = e.code === 'ERR_MODULE_NOT_FOUND' || e.code === 'MODULE_NOT_FOUND';
      if (notFound && String(e.message).includes(`'${packageName}'`)) {
        throw new PeerDependencyError(packageName, neededBy, { cause: err });
      }
      throw err;
    }
  }
}

/** The instance did not reach `running` (it failed, or `startTimeoutMs` passed). */
export class SessionStartError extends SessionError {
  declare readonly code: 'start_failed' | 'start_timeout';

  constructor(
    code: 'start_failed' | 'start_timeout',
    /** Undefined when the start request itself had not answered. */
    readonly instanceId: string | undefined,
    message: string,
    options?: ErrorOptions,
  ) {
    super(code, message, options);
  }
}

/** No saved auth state has this id or name. */
export class AuthStateNotFoundError extends SessionError {
  declare readonly code: 'auth_state_not_found';

  constructor(readonly idOrName: string) {
    super('auth_state_not_found', `No saved auth state has the id or name "${idOrName}"`);
  }
}

/** A name matches several saved auth states; pass one of their ids instead. */
export class AmbiguousAuthStateError extends SessionError {
  declare readonly code: 'auth_state_ambiguous';

  constructor(
    readonly stateName: string,
    /** The ids of every state with that name. */
    readonly ids: readonly string[],
  ) {
    super(
      'auth_state_ambiguous',
      `The name "${stateName}" matches ${ids.length} saved auth states (${ids.join(', ')}); pass one of these ids instead`,
    );
  }
}

/** The session was stopped; its browser objects and instance are gone. */
export class SessionStoppedError extends SessionError {
  declare readonly code: 'session_stopped';

  constructor(what: string) {
    super('session_stopped', `${what}: this session is stopped`);
  }
}

/** `reconnect()` could not connect the driver again; the driver's error is the `cause`. */
export class ReconnectError extends SessionError {
  declare readonly code: 'reconnect_failed';

  constructor(
    readonly instanceId: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super('reconnect_failed', message, options);
  }
}

/**
 * `session.handoff()` ended without the person pressing Done: it expired (`handoff_expired`) or
 * the instance stopped first (`handoff_cancelled`).
 */
export class HandoffError extends SessionError {
  declare readonly code: 'handoff_expired' | 'handoff_cancelled';

  constructor(
    code: 'handoff_expired' | 'handoff_cancelled',
    readonly instanceId: string,
    readonly handoffId: string,
  ) {
    super(
      code,
      code === 'handoff_expired'
        ? `Hand-off ${handoffId} of instance ${instanceId} expired before the person pressed Done`
        : `Hand-off ${handoffId} was cancelled: instance ${instanceId} stopped`,
    );
  }
}

/** Attaches `secondary` (a cleanup failure) to `primary` and returns `primary`, for rethrowing. */
export function withCleanupError(primary: unknown, secondary: unknown): unknown {
  if (secondary === undefined || primary === null || typeof primary !== 'object') return primary;
  Object.defineProperty(primary, 'cleanupError', {
    value: secondary,
    enumerable: true,
    configurable: true,
    writable: true,
  });
  return primary;
}
