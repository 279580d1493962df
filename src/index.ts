/**
 * `burrow`: the typed client for the Remote Instance Control Service and the bridge that opens
 * remote Playwright or Puppeteer sessions. A curated surface: every export is named here.
 */

// The client
export {
  AbortError,
  APIError,
  AuthenticationError,
  BadRequestError,
  Burrow,
  BurrowError,
  ClientClosedError,
  ConfigurationError,
  ConnectionError,
  ContractError,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitError,
  RequestFailedError,
  ServerError,
  TimeoutError,
  ValidationError,
} from './client/index.js';
export type {
  APIErrorCode,
  APIErrorInit,
  AuthenticateQuery,
  BurrowErrorCode,
  BurrowOptions,
  Clock,
  ModifyAuthQuery,
  RequestOptions,
  ResumeQuery,
  SaveAuthQuery,
  StreamResponse,
  UploadInput,
  UploadSource,
} from './client/index.js';

// The wire types
export type {
  AddCellRequest,
  AuthState,
  BashRequest,
  BrowserStartResult,
  CdpUrlResult,
  CodeExecuteRequest,
  CodeExecuteResult,
  ComputerAction,
  CurrentUrlResult,
  Download,
  EditRequest,
  EnvDeleteRequest,
  EnvGetResult,
  EnvSetRequest,
  EnvStatusResult,
  ExecuteCellRequest,
  FileRequest,
  Instance,
  KernelInfo,
  Notebook,
  NotebookCell,
  NotebookCreateRequest,
  NotebookDeleteResult,
  Recording,
  RecordingStartResult,
  SaveAuthResult,
  ScreenshotResult,
  StartRequest,
  StatusResult,
  StreamUrlResult,
  ToolResult,
  UploadResult,
  ValidationErrorItem,
  VersionResult,
} from './client/index.js';
export type { InstanceStatus, InstanceType, Resolution } from './api/index.js';
/** burrow extensions: hand-off to a person, and session time. */
export type { ExtendRequest, Handoff, HandoffRequest, HandoffStatus } from './api/index.js';
/** Playwright's `storageState` JSON, as `authStates.storageState()` / `import()` move it. */
export type { ImportAuthStateResult, StorageState, StorageStateInput } from './api/index.js';

// The bridge
export {
  AmbiguousAuthStateError,
  AuthStateNotFoundError,
  embeddedServer,
  HandoffError,
  openSession,
  PeerDependencyError,
  reapOrphans,
  ReconnectError,
  SESSION_ERROR_CODES,
  SessionError,
  SessionStartError,
  SessionStoppedError,
} from './session/index.js';
export type {
  DisconnectedEvent,
  DriverConnectOptions,
  DriverConnection,
  DriverModule,
  DriverName,
  DriverSession,
  EmbeddedServerLease,
  EmbeddedServerOptions,
  HandoffOptions,
  HandoffResult,
  OpenSessionOptions,
  PlaywrightSession,
  PuppeteerSession,
  ReapOptions,
  ReapReport,
  ReconnectedEvent,
  ReconnectFailedEvent,
  ReconnectOptions,
  SavedAuthState,
  Session,
  SessionAuth,
  SessionDownloads,
  SessionRecording,
  SessionBase,
  SessionErrorCode,
  SessionEvents,
  StoppedSession,
} from './session/index.js';
