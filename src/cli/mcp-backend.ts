/**
 * The MCP tools' backend (src/server/mcp/backend.ts) over the typed client, for `burrow mcp` on
 * stdio: every tool call is an API request to the server at the client's base URL, and the
 * browser tools open the `cdp_url` the server hands out. Client errors become tool failures with
 * the server's message and code (`x-burrow-error`), so stdio and `/mcp` report alike.
 */
import { APIError, BurrowError, type Burrow } from '../client/index.js';
import { McpToolFailure, type McpBackend } from '../server/mcp/backend.js';

/** The server's `detail` (a string, or the 422 items joined) of an API error. */
function detailOf(err: APIError): string {
  const detail = (err.body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    const items = detail as { loc?: unknown[]; msg?: string }[];
    return `Invalid request: ${items.map((i) => `${(i.loc ?? []).join('.')}: ${i.msg ?? ''}`).join('; ')}`;
  }
  return err.message;
}

function failure(err: unknown): unknown {
  if (err instanceof APIError) {
    const code = err.serverCode ?? (err.status === 422 ? 'validation_error' : err.code);
    // a full server's or cluster's wait, in the same whole seconds as on /mcp
    const wait = err.retryAfterMs === undefined ? undefined : Math.ceil(err.retryAfterMs / 1000);
    return new McpToolFailure(detailOf(err), code, err.status, wait);
  }
  if (err instanceof BurrowError) return new McpToolFailure(err.message, err.code);
  return err;
}

const mapped =
  <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
  async (...args: A): Promise<R> => {
    try {
      return await fn(...args);
    } catch (err) {
      throw failure(err);
    }
  };

export function clientBackend(api: Burrow): McpBackend {
  return {
    start: mapped((body) => api.instances.start(body)),
    get: mapped((id) => api.instances.get(id)),
    list: mapped(() => api.instances.list()),
    stop: mapped(async (id) => {
      await api.instances.stop(id);
    }),
    screenshot: mapped(async (id) => (await api.instance.screenshot(id)).base64_image),
    streamUrl: mapped(async (id) => (await api.instance.streamUrl(id)).stream_url),
    computer: mapped((id, action) => api.instance.computer(id, action)),
    bash: mapped((id, body) => api.instance.bash(id, body)),
    edit: mapped((id, body) => api.instance.edit(id, body)),
    file: mapped((id, body) => api.instance.file(id, body)),
    codeExecute: mapped((id, body) => api.code.execute(id, body)),
    cdpUrl: mapped(async (id) => (await api.browser.start(id)).cdp_url),
    currentUrl: mapped(async (id) => (await api.browser.currentUrl(id)).current_url),
    saveAuth: mapped((id, name) => api.browser.saveAuth(id, name === undefined ? {} : { name })),
    authenticate: mapped(async (id, authStateId) => {
      await api.browser.authenticate(id, { auth_state_id: authStateId });
    }),
    listAuthStates: mapped(() => api.authStates.list()),
    handoff: mapped((id, body) => api.instances.handoff(id, body)),
    handoffStatus: mapped((id, handoffId, wait) =>
      api.instances.handoffStatus(id, handoffId, { wait_seconds: wait }),
    ),
    extend: mapped((id, body) => api.instances.extend(id, body)),
    listExtensions: mapped(() => api.extensions.list()),
  };
}
