/** The HTTP client: `Burrow`, its option and result types, and every error class. */
export { Burrow } from './client.js';
export type { BurrowOptions, RequestOptions, StreamResponse } from './core.js';
export type { Clock } from './retry.js';
export type { UploadSource } from './multipart.js';
export type { UploadInput } from './resources/instance.js';
export type { ResumeQuery } from './resources/instances.js';
export type { AuthenticateQuery, ModifyAuthQuery, SaveAuthQuery } from './resources/browser.js';
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
} from '../api/index.js';
export {
  AbortError,
  APIError,
  AuthenticationError,
  BadRequestError,
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
} from './errors.js';
export type { APIErrorCode, APIErrorInit, BurrowErrorCode } from './errors.js';
