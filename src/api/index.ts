export {
  AddCellRequest,
  AuthState,
  AuthenticateQuery,
  BashRequest,
  BrowserStartResult,
  CdpUrlResult,
  CodeExecuteRequest,
  CodeExecuteResult,
  CurrentUrlResult,
  EDIT_COMMANDS,
  EditRequest,
  EnvDeleteRequest,
  EnvGetResult,
  EnvSetRequest,
  EnvStatusResult,
  ExecuteCellRequest,
  FILE_COMMANDS,
  FileRequest,
  INSTANCE_STATUSES,
  INSTANCE_TYPES,
  WIRE_INSTANCE_TYPES,
  EndReason,
  Instance,
  InstanceLimits,
  InstanceStatus,
  InstanceType,
  type RunnableInstanceType,
  KernelInfo,
  ModifyAuthQuery,
  NbOutput,
  Notebook,
  NotebookCell,
  NotebookCellType,
  NotebookCreateRequest,
  NotebookDeleteResult,
  Resolution,
  ResumeQuery,
  SaveAuthQuery,
  SaveAuthResult,
  ScreenshotResult,
  StartRequest,
  StatusResult,
  StreamUrlResult,
  ToolResult,
  UploadFields,
  UploadResult,
} from './schemas.js';
export {
  PROXY_SCHEMES,
  ProxySettings,
  parseProxyServer,
  proxyServerProblem,
  type ProxyScheme,
  type ProxyServer,
} from './proxy.js';
export { ComputerAction, Coordinates, MOUSE_BUTTONS, MouseButton } from './computer.js';
export type { ParsedComputerAction } from './computer.js';
export { API_VERSION, VersionResult } from './meta.js';
export {
  AuthStatePath,
  DeleteAuthStateResult,
  ImportAuthStateQuery,
  ImportAuthStateResult,
  IndexedDBDatabase,
  StorageState,
  StorageStateCookie,
  StorageStateOrigin,
} from './auth-states.js';
export type { StorageStateInput } from './auth-states.js';
export {
  DOWNLOAD_STATES,
  Download,
  DownloadPath,
  RECORDING_STATES,
  Recording,
  RecordingPath,
  RecordingStartResult,
} from './artifacts.js';
export {
  DEFAULT_HANDOFF_SECONDS,
  DEFAULT_HANDOFF_WAIT_SECONDS,
  ExtendRequest,
  HANDOFF_STATUSES,
  Handoff,
  HandoffPath,
  HandoffRequest,
  HandoffStatus,
  HandoffWaitQuery,
  MAX_HANDOFF_MESSAGE,
  MAX_HANDOFF_SECONDS,
  MAX_HANDOFF_WAIT_SECONDS,
  MAX_TIMEOUT_HOURS,
} from './session-time.js';
// browser extensions (burrow extension routes)
export {
  DeleteExtensionResult,
  ExtensionId,
  ExtensionInfo,
  ExtensionPath,
  ExtensionUploadFields,
  ProfileInfo,
  ProfileName,
  ProfilePath,
  StartProfile,
} from './extensions.js';
// API keys of projects, cluster mode (burrow extension routes)
export {
  KeyCreateRequest,
  KeyCreated,
  KeyInfo,
  KeyPath,
  ProjectName,
  RevokeKeyResult,
} from './keys.js';
// the node itself: drain (burrow extension route)
export { DrainResult } from './node.js';
export { operationIds, operations } from './operations.js';
export type {
  BodyKind,
  HttpMethod,
  JsonOperationId,
  OperationId,
  OperationSpec,
  Operations,
  ResponseKind,
  StreamOperationId,
} from './operations.js';
// the size of one CDP message on a cdp_url, each way
export {
  CDP_MAX_COMMAND_BYTES,
  CDP_MAX_COMMAND_WIRE_BYTES,
  CDP_MAX_MESSAGE_BYTES,
} from './cdp-limits.js';
export { jsonErrorOffset, validationDetail, wireParse } from './validation.js';
export type { Location, ValidationErrorItem } from './validation.js';
