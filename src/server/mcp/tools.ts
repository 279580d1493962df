/**
 * One MCP session of burrow: an `McpServer` (from @modelcontextprotocol/sdk) with burrow's tools,
 * over a backend (backend.ts) that is either this server's own handlers or a remote one.
 *
 * - The tools are values, one module per area under tools/ (instances, hand-off, navigation, input, tabs,
 *   dialogs, browser, computer, ubuntu, auth); this file only lists them and registers them on the server. What
 *   they share for the session (its instances, browser connections) is an `McpContext`.
 * - Browser tools carry the names and argument names of Playwright's MCP server
 *   (`browser_navigate {url}`, `browser_click {element, ref}`, …) so agents written for it work
 *   unchanged; burrow's own tools are prefixed `instance_`, `computer_`, `ubuntu_` and `auth_`.
 * - Input schemas are the zod schemas of src/api (the wire contract) plus `instance_id`; a tool
 *   without `instance_id` acts on the instance this session started last.
 * - Every result that concerns an instance ends with its live-view URL.
 * - Failures are tool results with `isError: true`, burrow's message and its error code; the
 *   session goes on.
 * - `close()` (the transport closed, or the HTTP session ended) stops every instance the session
 *   started.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { CdpError } from '../chromium/cdp.js';
import { burrowVersion } from '../meta.js';
import { McpToolFailure, type McpBackend } from './backend.js';
import { McpContext, text, type AutoStartOptions } from './context.js';
import { authTools } from './tools/auth.js';
import { browserTools } from './tools/browser.js';
import type { AnyMcpTool } from './tools/common.js';
import { computerTools } from './tools/computer.js';
import { dialogTools } from './tools/dialogs.js';
import { handoffTools } from './tools/handoff.js';
import { inputTools } from './tools/input.js';
import { instanceTools } from './tools/instances.js';
import { navigationTools } from './tools/navigation.js';
import { tabTools } from './tools/tabs.js';
import { ubuntuTools } from './tools/ubuntu.js';

export interface McpSessionOptions {
  backend: McpBackend;
  /** The start options of the browser a `browser_*` call starts when the session has none. */
  autoStart?: AutoStartOptions;
  /** Reported to clients in `serverInfo.version`. Default burrow's own version. */
  version?: string;
}

export interface McpSession {
  readonly server: McpServer;
  /** Instances this session started and has not stopped, oldest first. */
  readonly instances: readonly string[];
  /** Stops every instance the session started and closes its browser connections. Idempotent. */
  close(): Promise<void>;
}

/** Every tool of a session, in the order `tools/list` answers them. */
export const mcpTools: readonly AnyMcpTool[] = [
  ...instanceTools,
  ...handoffTools,
  ...navigationTools,
  ...inputTools,
  ...tabTools,
  ...dialogTools,
  ...browserTools,
  ...computerTools,
  ...ubuntuTools,
  ...authTools,
];

/** A thrown error as the MCP tool error an agent sees: message, code, status. */
export function toolError(err: unknown): CallToolResult {
  let failure: McpToolFailure;
  if (err instanceof McpToolFailure) failure = err;
  else if (err instanceof CdpError) failure = new McpToolFailure(err.message, 'cdp_error');
  else
    failure = new McpToolFailure(
      err instanceof Error ? err.message : String(err),
      'internal_error',
    );
  const status = failure.status !== undefined ? `, HTTP ${failure.status}` : '';
  const wait = failure.retryAfterSeconds;
  const retry = wait !== undefined ? `, retry after ${wait} s` : '';
  return {
    isError: true,
    content: [text(`Error: ${failure.message} [${failure.code}${status}${retry}]`)],
    structuredContent: {
      error: {
        message: failure.message,
        code: failure.code,
        ...(failure.status !== undefined && { status: failure.status }),
        ...(wait !== undefined && { retry_after_seconds: wait }),
      },
    },
  };
}

export function createMcpSession(opts: McpSessionOptions): McpSession {
  const server = new McpServer(
    { name: 'burrow', version: opts.version ?? burrowVersion() },
    {
      instructions:
        'burrow runs remote browsers and Linux desktops. Start one with instance_start, then use the browser_* tools (accessibility snapshot with element refs) or computer_* (pixels). Instances started here stop when this session ends.',
    },
  );
  const ctx = new McpContext(opts.backend, opts.autoStart);
  for (const tool of mcpTools) {
    const handler = async (input: Record<string, unknown>): Promise<CallToolResult> => {
      try {
        return await tool.handler(ctx, input);
      } catch (err) {
        return toolError(err);
      }
    };
    server.registerTool(
      tool.name,
      {
        description: tool.description,
        inputSchema: tool.input,
        annotations: tool.annotations ?? {},
      },
      handler,
    );
  }
  return {
    server,
    get instances() {
      return [...ctx.started];
    },
    close: () => ctx.close(),
  };
}
