/**
 * The state one MCP session's tools share (tools/*.ts): the backend, the instances the session
 * started (the last one is the default target), the open browser connection of each instance
 * and its live-view URL. A handler gets this object; it never sees the MCP server itself.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Instance, StartRequest } from '../../api/index.js';
import { McpToolFailure, type McpBackend } from './backend.js';
import { PageTools } from './page.js';

export type Content = CallToolResult['content'][number];

export const text = (t: string): Content => ({ type: 'text', text: t });

/**
 * How a `browser_*` tool starts a browser when the session has none (as Playwright's MCP server
 * launches its browser on first use): the start options `burrow mcp` was given.
 */
export interface AutoStartOptions {
  resolution?: [number, number];
  blocked_domains?: string[];
  /** A saved auth state (id or unique name) applied once the browser started. */
  auth_state?: string;
  /** The upstream proxy its egress chains to (`proxy` of the start request). */
  proxy?: StartRequest['proxy'];
}

export class McpContext {
  readonly backend: McpBackend;
  readonly autoStart: AutoStartOptions;
  #autoStarting: Promise<string> | undefined;
  /** Instances this session started and has not stopped, oldest first. */
  readonly started: string[] = [];
  readonly #pages = new Map<string, Promise<PageTools>>();
  readonly #liveViews = new Map<string, Promise<string>>();
  #closed: Promise<void> | undefined;

  constructor(backend: McpBackend, autoStart: AutoStartOptions = {}) {
    this.backend = backend;
    this.autoStart = autoStart;
  }

  /** True once `close()` was called: an instance started now has nobody left to stop it. */
  get closed(): boolean {
    return this.#closed !== undefined;
  }

  /** The instance a tool acts on: the one named, else the one started last. */
  target(id: string | undefined): string {
    const chosen = id ?? this.started.at(-1);
    if (chosen === undefined) {
      throw new McpToolFailure(
        'No instance: start one with instance_start or pass instance_id',
        'no_instance',
      );
    }
    return chosen;
  }

  /**
   * The instance a browser tool acts on: the one named, else the one started last, else a browser
   * started now with the auto-start options (one at a time, however many calls ask at once).
   */
  async browserTarget(id: string | undefined): Promise<string> {
    const chosen = id ?? this.started.at(-1);
    if (chosen !== undefined) return chosen;
    this.#autoStarting ??= (async () => {
      const { auth_state, ...options } = this.autoStart;
      const inst = await this.start({ instance_type: 'browser', ...options });
      if (auth_state !== undefined) await this.applyAuth(inst.id, auth_state);
      return inst.id;
    })().finally(() => (this.#autoStarting = undefined));
    return this.#autoStarting;
  }

  /** Starts an instance owned by this session (stopped when it ends). */
  async start(body: StartRequest): Promise<Instance> {
    const inst = await this.backend.start(body);
    if (this.closed) {
      // the session ended while the instance started: nobody is left to stop it later
      await this.backend.stop(inst.id).catch(() => undefined);
      throw new McpToolFailure('The MCP session ended', 'session_closed');
    }
    this.started.push(inst.id);
    return inst;
  }

  /** Stops an instance and forgets what this session held of it. */
  async stop(id: string): Promise<void> {
    this.dropPage(id);
    await this.backend.stop(id);
    const i = this.started.indexOf(id);
    if (i >= 0) this.started.splice(i, 1);
    this.#liveViews.delete(id);
  }

  liveView(id: string): Promise<string> {
    let url = this.#liveViews.get(id);
    if (!url) {
      url = this.backend.streamUrl(id);
      url.catch(() => this.#liveViews.delete(id));
      this.#liveViews.set(id, url);
    }
    return url;
  }

  /** The result's content followed by the instance's live-view URL (when it has one). */
  async about(id: string, content: Content[]): Promise<CallToolResult> {
    const url = await this.liveView(id).catch(() => undefined);
    return { content: url ? [...content, text(`Live view: ${url}`)] : content };
  }

  /** The browser tools of an instance, connecting (again) when there is no open connection. */
  async page(id: string): Promise<PageTools> {
    let p = this.#pages.get(id);
    if (p) {
      const open = await p.catch(() => undefined);
      if (open?.isOpen) return open;
      this.#pages.delete(id);
    }
    p = this.backend.cdpUrl(id).then((url) => PageTools.open(url));
    p.catch(() => this.#pages.delete(id));
    this.#pages.set(id, p);
    return p;
  }

  /** Closes the browser connection of an instance, if one is open. */
  dropPage(id: string): void {
    const p = this.#pages.get(id);
    this.#pages.delete(id);
    void p?.then(
      (t) => t.close(),
      () => undefined,
    );
  }

  /** Applies a saved auth state, named by id or unique name; answers its id. */
  async applyAuth(id: string, nameOrId: string): Promise<string> {
    const states = await this.backend.listAuthStates();
    const byId = states.find((s) => s.id === nameOrId);
    const byName = states.filter((s) => s.name === nameOrId);
    if (!byId && byName.length > 1) {
      throw new McpToolFailure(
        `${byName.length} auth states are named "${nameOrId}"; pass an id`,
        'auth_state_ambiguous',
      );
    }
    const state = byId ?? byName[0];
    if (!state) {
      throw new McpToolFailure(
        `No auth state with id or name "${nameOrId}"`,
        'auth_state_not_found',
        404,
      );
    }
    await this.backend.authenticate(id, state.id);
    return state.id;
  }

  /** Stops every instance the session started and closes its browser connections. Idempotent. */
  close(): Promise<void> {
    return (this.#closed ??= (async () => {
      for (const id of [...this.#pages.keys()]) this.dropPage(id);
      const ids = this.started.splice(0);
      await Promise.all(ids.map((id) => this.backend.stop(id).catch(() => undefined)));
    })());
  }
}
