/**
 * What the MCP tools (tools.ts) need from burrow, as a small interface with two implementations:
 * in-process on `burrow serve` (http.ts: the operation handlers and the CDP relay on loopback)
 * and over the typed client for `burrow mcp` on stdio (src/cli/mcp-backend.ts). The tools never
 * know which one they run on, so both transports answer alike.
 *
 * Every method takes and returns the wire shapes of src/api (snake_case).
 */
import { EncodedJson } from '../../internal/encoded-json.js';
import type {
  AuthState,
  BashRequest,
  CodeExecuteRequest,
  CodeExecuteResult,
  ComputerAction,
  EditRequest,
  ExtendRequest,
  ExtensionInfo,
  FileRequest,
  Handoff,
  HandoffRequest,
  Instance,
  SaveAuthResult,
  StartRequest,
  ToolResult,
} from '../../api/index.js';

/**
 * The value of a handler's answer, for a caller in this process: an answer the HTTP layer sends
 * as already-encoded bytes (`EncodedJson`, e.g. code execution's outputs) is decoded.
 */
export function answerOf(answer: unknown): unknown {
  return answer instanceof EncodedJson ? answer.value() : answer;
}

export interface McpBackend {
  start(body: StartRequest): Promise<Instance>;
  get(instanceId: string): Promise<Instance>;
  list(): Promise<Instance[]>;
  stop(instanceId: string): Promise<void>;
  /** Base64 PNG of the instance's screen (a browser instance: its active tab). */
  screenshot(instanceId: string): Promise<string>;
  streamUrl(instanceId: string): Promise<string>;
  computer(instanceId: string, action: ComputerAction): Promise<ToolResult>;
  bash(instanceId: string, body: BashRequest): Promise<ToolResult>;
  edit(instanceId: string, body: EditRequest): Promise<ToolResult>;
  file(instanceId: string, body: FileRequest): Promise<ToolResult>;
  codeExecute(instanceId: string, body: CodeExecuteRequest): Promise<CodeExecuteResult>;
  /**
   * A DevTools WebSocket URL of the instance's browser that this process can open (the relay
   * behind `cdp_url`, token included); starts the browser of an ubuntu instance if need be.
   */
  cdpUrl(instanceId: string): Promise<string>;
  currentUrl(instanceId: string): Promise<string>;
  saveAuth(instanceId: string, name: string | undefined): Promise<SaveAuthResult>;
  authenticate(instanceId: string, authStateId: string): Promise<void>;
  listAuthStates(): Promise<AuthState[]>;
  // burrow extensions: hand-off to a person, and session time
  handoff(instanceId: string, body: HandoffRequest): Promise<Handoff>;
  /** The hand-off's status after waiting up to `waitSeconds` for it to end. */
  handoffStatus(instanceId: string, handoffId: string, waitSeconds: number): Promise<Handoff>;
  extend(instanceId: string, body: ExtendRequest): Promise<Instance>;
  /** Uploaded browser extensions, which `start` loads by id (`extensions`). */
  listExtensions(): Promise<ExtensionInfo[]>;
}

/**
 * A failure as an MCP tool error shows it: burrow's message, its stable code (the rows of
 * docs/server-errors.md, `validation_error` for a 422), the HTTP status it would have had, and
 * the seconds its `Retry-After` said (a full server or cluster), so an agent knows when to ask
 * again.
 */
export class McpToolFailure extends Error {
  override name = 'McpToolFailure';
  constructor(
    message: string,
    readonly code: string,
    readonly status?: number | undefined,
    readonly retryAfterSeconds?: number | undefined,
  ) {
    super(message);
  }
}
