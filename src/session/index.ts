/** The bridge: `openSession`, its types and errors, the ledger reaper and the embedded server. */
export { openSession } from './session.js';
export type {
  DisconnectedEvent,
  DriverSession,
  PlaywrightSession,
  PuppeteerSession,
  ReconnectedEvent,
  ReconnectFailedEvent,
  Session,
  SessionBase,
  SessionEvents,
  StoppedSession,
} from './session-types.js';
export type { OpenSessionOptions, ReconnectOptions } from './options.js';
export type { SavedAuthState, SessionAuth } from './auth.js';
export type { SessionDownloads, SessionRecording } from './artifacts.js';
export type { HandoffOptions, HandoffResult } from './handoff.js';
export type { DriverConnectOptions, DriverConnection, DriverModule, DriverName } from './driver.js';
export { embeddedServer } from './embedded.js';
export type { EmbeddedServerLease, EmbeddedServerOptions } from './embedded.js';
export { reapOrphans } from './reaper.js';
export type { ReapOptions, ReapReport } from './reaper.js';
export {
  AmbiguousAuthStateError,
  AuthStateNotFoundError,
  HandoffError,
  PeerDependencyError,
  ReconnectError,
  SESSION_ERROR_CODES,
  SessionError,
  SessionStartError,
  SessionStoppedError,
} from './errors.js';
export type { SessionErrorCode } from './errors.js';
