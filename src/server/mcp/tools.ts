/**
 * One MCP session of burrow: an `McpServer` (from @modelcontextprotocol/sdk) with burrow's tools,
 * over a backend (backend.ts) that is either this server's own handlers or a remote one.
 *
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
import { z } from 'zod';
import {
  ClickMouseAction,
  DragMouseAction,
  GetCursorPositionAction,
  MoveMouseAction,
  PressKeyAction,
  ScrollAction,
  TakeScreenshotAction,
  TypeTextAction,
  WaitAction,
} from '../../api/computer.js';
import {
  BashRequest,
  CodeExecuteRequest,
  EditRequest,
  FileRequest,
  StartRequest,
  type Instance,
  type ToolResult,
} from '../../api/index.js';
import { CdpError } from '../chromium/cdp.js';
import { burrowVersion } from '../meta.js';
import { McpToolFailure, type McpBackend } from './backend.js';
import { PageTools, type PageState } from './page.js';

export interface McpSessionOptions {
  backend: McpBackend;
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

type Content = CallToolResult['content'][number];

const instanceId = z
  .string()
  .min(1)
  .optional()
  .describe('Instance to act on; default: the instance this MCP session started last');
const element = z
  .string()
  .describe(
    'Human-readable element description used to obtain permission to interact with the element',
  );
const ref = z.string().describe('Exact target element reference from the page snapshot');

const text = (t: string): Content => ({ type: 'text', text: t });
const json = (v: unknown) => JSON.stringify(v, null, 2);

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
  return {
    isError: true,
    content: [text(`Error: ${failure.message} [${failure.code}${status}]`)],
    structuredContent: {
      error: {
        message: failure.message,
        code: failure.code,
        ...(failure.status !== undefined && { status: failure.status }),
      },
    },
  };
}

export function createMcpSession(opts: McpSessionOptions): McpSession {
  const { backend } = opts;
  const server = new McpServer(
    { name: 'burrow', version: opts.version ?? burrowVersion() },
    {
      instructions:
        'burrow runs remote browsers and Linux desktops. Start one with instance_start, then use the browser_* tools (accessibility snapshot with element refs) or computer_* (pixels). Instances started here stop when this session ends.',
    },
  );
  const started: string[] = [];
  const pages = new Map<string, Promise<PageTools>>();
  const liveViews = new Map<string, Promise<string>>();
  let closed: Promise<void> | undefined;

  const target = (id: string | undefined): string => {
    const chosen = id ?? started.at(-1);
    if (chosen === undefined) {
      throw new McpToolFailure(
        'No instance: start one with instance_start or pass instance_id',
        'no_instance',
      );
    }
    return chosen;
  };

  const liveView = (id: string): Promise<string> => {
    let url = liveViews.get(id);
    if (!url) {
      url = backend.streamUrl(id);
      url.catch(() => liveViews.delete(id));
      liveViews.set(id, url);
    }
    return url;
  };

  /** The result's content followed by the instance's live-view URL (when it has one). */
  const about = async (id: string, content: Content[]): Promise<CallToolResult> => {
    const url = await liveView(id).catch(() => undefined);
    return { content: url ? [...content, text(`Live view: ${url}`)] : content };
  };

  const page = async (id: string): Promise<PageTools> => {
    let p = pages.get(id);
    if (p) {
      const open = await p.catch(() => undefined);
      if (open?.isOpen) return open;
      pages.delete(id);
    }
    p = backend.cdpUrl(id).then((url) => PageTools.open(url));
    p.catch(() => pages.delete(id));
    pages.set(id, p);
    return p;
  };

  const pageState = (s: PageState): Content =>
    text(
      `### Page state\n- Page URL: ${s.url}\n- Page Title: ${s.title}\n- Page Snapshot:\n\`\`\`yaml\n${s.snapshot}\n\`\`\``,
    );

  const toolResultContent = (r: ToolResult): Content[] => {
    const out: Content[] = [];
    if (r.output) out.push(text(r.output));
    if (r.error) out.push(text(`error: ${r.error}`));
    if (r.system) out.push(text(`system: ${r.system}`));
    if (r.base64_image) out.push({ type: 'image', data: r.base64_image, mimeType: 'image/png' });
    if (out.length === 0) out.push(text('done'));
    return out;
  };

  /** Registers a tool whose failures become tool errors. */
  function tool<S extends z.ZodObject>(
    name: string,
    description: string,
    schema: S,
    run: (args: z.output<S>) => Promise<CallToolResult>,
    annotations: { readOnlyHint?: boolean; destructiveHint?: boolean } = {},
  ): void {
    server.registerTool(name, { description, inputSchema: schema, annotations }, (async (
      args: z.output<S>,
    ) => {
      try {
        return await run(args);
      } catch (err) {
        return toolError(err);
      }
    }) as never);
  }

  // ---------------------------------------------------------------------------------- instances

  tool(
    'instance_start',
    'Start a remote instance: "browser" (Chromium) or "ubuntu" (a Linux desktop with bash, files, code execution and a browser). Returns its id and live-view URL; later tools act on it by default. It is stopped when this MCP session ends.',
    StartRequest.extend({
      instance_type: z.enum(['browser', 'ubuntu']).describe('"browser" or "ubuntu"'),
      auth_state: z
        .string()
        .min(1)
        .optional()
        .describe('A saved auth state (id or unique name) to apply to the browser once started'),
    }),
    async ({ auth_state, ...body }) => {
      const inst = await backend.start(body);
      if (closed) {
        // the session ended while the instance started: nobody is left to stop it later
        await backend.stop(inst.id).catch(() => undefined);
        throw new McpToolFailure('The MCP session ended', 'session_closed');
      }
      started.push(inst.id);
      if (auth_state !== undefined) await applyAuth(inst.id, auth_state);
      return about(inst.id, [
        text(`Started ${inst.instance_type} instance ${inst.id}`),
        text(json(inst)),
      ]);
    },
  );

  tool(
    'instance_list',
    'List the instances of the server.',
    z.object({}),
    async () => {
      const list: Instance[] = await backend.list();
      return { content: [text(json(list))] };
    },
    { readOnlyHint: true },
  );

  tool(
    'instance_stop',
    'Stop an instance (default: the one this session started last).',
    z.object({ instance_id: instanceId }),
    async (args) => {
      const id = target(args.instance_id);
      const p = pages.get(id);
      pages.delete(id);
      void p?.then(
        (t) => t.close(),
        () => undefined,
      );
      await backend.stop(id);
      const i = started.indexOf(id);
      if (i >= 0) started.splice(i, 1);
      liveViews.delete(id);
      return { content: [text(`Stopped instance ${id}`)] };
    },
    { destructiveHint: true },
  );

  tool(
    'instance_current_url',
    "URL of the instance's active browser tab.",
    z.object({ instance_id: instanceId }),
    async (args) => {
      const id = target(args.instance_id);
      return about(id, [text(await backend.currentUrl(id))]);
    },
    { readOnlyHint: true },
  );

  // ------------------------------------------------------------------------------------ browser

  tool(
    'browser_navigate',
    'Navigate to a URL',
    z.object({ url: z.string().describe('The URL to navigate to'), instance_id: instanceId }),
    async (args) => {
      const id = target(args.instance_id);
      const p = await page(id);
      await p.navigate(args.url);
      return about(id, [text(`Navigated to ${args.url}`), pageState(await p.state())]);
    },
  );

  tool(
    'browser_navigate_back',
    'Go back to the previous page',
    z.object({ instance_id: instanceId }),
    async (args) => {
      const id = target(args.instance_id);
      const p = await page(id);
      await p.back();
      return about(id, [pageState(await p.state())]);
    },
  );

  tool(
    'browser_snapshot',
    'Capture accessibility snapshot of the current page, this is better than screenshot',
    z.object({ instance_id: instanceId }),
    async (args) => {
      const id = target(args.instance_id);
      return about(id, [pageState(await (await page(id)).state())]);
    },
    { readOnlyHint: true },
  );

  tool(
    'browser_click',
    'Perform click on a web page',
    z.object({
      element,
      ref,
      doubleClick: z
        .boolean()
        .optional()
        .describe('Whether to perform a double click instead of a single click'),
      button: z
        .enum(['left', 'right', 'middle'])
        .optional()
        .describe('Button to click, defaults to left'),
      modifiers: z
        .array(z.enum(['Alt', 'Control', 'ControlOrMeta', 'Meta', 'Shift']))
        .optional()
        .describe('Modifier keys to press'),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const p = await page(id);
      await p.click(args.ref, {
        ...(args.button && { button: args.button }),
        ...(args.doubleClick && { doubleClick: true }),
        ...(args.modifiers && { modifiers: args.modifiers }),
      });
      return about(id, [text(`Clicked ${args.element}`), pageState(await p.state())]);
    },
  );

  tool(
    'browser_type',
    'Type text into editable element',
    z.object({
      element,
      ref,
      text: z.string().describe('Text to type into the element'),
      submit: z.boolean().optional().describe('Whether to submit entered text (press Enter after)'),
      slowly: z
        .boolean()
        .optional()
        .describe('Accepted for compatibility; text is always inserted at once'),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const p = await page(id);
      await p.type(args.ref, args.text, args.submit ?? false);
      return about(id, [text(`Typed into ${args.element}`), pageState(await p.state())]);
    },
  );

  tool(
    'browser_hover',
    'Hover over element on page',
    z.object({ element, ref, instance_id: instanceId }),
    async (args) => {
      const id = target(args.instance_id);
      const p = await page(id);
      await p.hover(args.ref);
      return about(id, [text(`Hovered ${args.element}`), pageState(await p.state())]);
    },
  );

  tool(
    'browser_select_option',
    'Select an option in a dropdown',
    z.object({
      element,
      ref,
      values: z
        .array(z.string())
        .describe(
          'Array of values to select in the dropdown. This can be a single value or multiple values.',
        ),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const p = await page(id);
      const picked = await p.selectOption(args.ref, args.values);
      return about(id, [
        text(`Selected ${JSON.stringify(picked)} in ${args.element}`),
        pageState(await p.state()),
      ]);
    },
  );

  tool(
    'browser_evaluate',
    'Evaluate JavaScript expression on page or element',
    z.object({
      function: z
        .string()
        .describe('() => { /* code */ } or (element) => { /* code */ } when element is provided'),
      element: element.optional(),
      ref: ref.optional(),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const value = await (await page(id)).evaluate(args.function, args.ref);
      return about(id, [text(value === undefined ? 'undefined' : json(value))]);
    },
  );

  tool(
    'browser_tabs',
    'List, create, close, or select a browser tab.',
    z.object({
      action: z.enum(['list', 'new', 'close', 'select']).describe('Operation to perform'),
      index: z
        .int()
        .min(0)
        .optional()
        .describe('Tab index, used for close/select. If omitted for close, current tab is closed.'),
      url: z.string().optional().describe('For "new": a URL to open in the new tab'),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const p = await page(id);
      if (args.action === 'new') await p.newTab(args.url);
      else if (args.action === 'close') await p.closeTab(args.index);
      else if (args.action === 'select') {
        if (args.index === undefined) {
          throw new McpToolFailure('"select" needs an index', 'validation_error');
        }
        await p.selectTab(args.index);
      }
      const tabs = await p.tabs();
      const lines = tabs.map(
        (t) => `- ${t.index}:${t.current ? ' (current)' : ''} [${t.title}] (${t.url})`,
      );
      return about(id, [text(`### Open tabs\n${lines.join('\n')}`)]);
    },
  );

  tool(
    'browser_wait_for',
    'Wait for text to appear or disappear or a specified time to pass',
    z.object({
      time: z.number().min(0).max(60).optional().describe('The time to wait in seconds'),
      text: z.string().optional().describe('The text to wait for'),
      textGone: z.string().optional().describe('The text to wait for to disappear'),
      instance_id: instanceId,
    }),
    async (args) => {
      if (args.time === undefined && args.text === undefined && args.textGone === undefined) {
        throw new McpToolFailure('Give text, textGone or time', 'validation_error');
      }
      const id = target(args.instance_id);
      const p = await page(id);
      await p.waitFor({
        ...(args.time !== undefined && { time: args.time }),
        ...(args.text !== undefined && { text: args.text }),
        ...(args.textGone !== undefined && { textGone: args.textGone }),
      });
      return about(id, [text('Waited'), pageState(await p.state())]);
    },
  );

  tool(
    'browser_take_screenshot',
    "Take a screenshot of the current page (returned as an image). You can't perform actions based on the screenshot, use browser_snapshot for actions.",
    z.object({
      type: z.enum(['png', 'jpeg']).optional().describe('Image format. Default is png.'),
      filename: z
        .string()
        .optional()
        .describe('Accepted for compatibility; the image is returned, not saved'),
      element: element.optional(),
      ref: ref.optional(),
      fullPage: z
        .boolean()
        .optional()
        .describe('Take a screenshot of the full scrollable page instead of the viewport'),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const shot = await (
        await page(id)
      ).screenshot({
        ...(args.type && { type: args.type }),
        ref: args.ref,
        fullPage: args.fullPage,
      });
      return about(id, [{ type: 'image', ...shot }]);
    },
    { readOnlyHint: true },
  );

  // ----------------------------------------------------------------------------------- computer

  const computerTools = [
    ['move_mouse', MoveMouseAction, 'Move the mouse pointer to coordinates [x, y].'],
    [
      'click_mouse',
      ClickMouseAction,
      'Click (or press/release) a mouse button, at coordinates or where the pointer is.',
    ],
    ['drag_mouse', DragMouseAction, 'Drag with the left button held along a path of points.'],
    ['scroll', ScrollAction, 'Scroll by wheel notches (positive delta_y = down).'],
    ['press_key', PressKeyAction, 'Press keys together (X keysyms such as "ctrl", "Return").'],
    ['type_text', TypeTextAction, 'Type text.'],
    ['wait', WaitAction, 'Wait a number of seconds.'],
    ['take_screenshot', TakeScreenshotAction, 'Screenshot of the whole screen.'],
    ['get_cursor_position', GetCursorPositionAction, 'Where the mouse pointer is.'],
  ] as const;
  for (const [action, schema, description] of computerTools) {
    tool(
      `computer_${action}`,
      `${description} Screen pixels of the instance; a screenshot follows unless screenshot is false.`,
      (schema as z.ZodObject).omit({ action: true }).extend({ instance_id: instanceId }),
      async (args) => {
        const { instance_id, ...rest } = args as { instance_id?: string };
        const id = target(instance_id);
        const r =
          action === 'take_screenshot'
            ? { base64_image: await backend.screenshot(id) }
            : await backend.computer(id, { action, ...rest } as never);
        return about(id, toolResultContent(r));
      },
      { readOnlyHint: action === 'take_screenshot' || action === 'get_cursor_position' },
    );
  }

  // ------------------------------------------------------------------------------------- ubuntu

  tool(
    'ubuntu_bash',
    'Run a bash command in a persistent shell session of an ubuntu instance (sessions keep cd and exports).',
    BashRequest.extend({ instance_id: instanceId }),
    async ({ instance_id, ...body }) => {
      const id = target(instance_id);
      return about(id, toolResultContent(await backend.bash(id, body)));
    },
  );
  tool(
    'ubuntu_edit',
    'View, create and edit files on an ubuntu instance (view, create, str_replace, insert, undo_edit).',
    EditRequest.extend({ instance_id: instanceId }),
    async ({ instance_id, ...body }) => {
      const id = target(instance_id);
      return about(id, toolResultContent(await backend.edit(id, body)));
    },
  );
  tool(
    'ubuntu_file',
    'File operations on an ubuntu instance: read, write, append, delete, exists, list, mkdir, rmdir, move, copy, view, create, replace, insert, delete_lines, undo, grep.',
    FileRequest.extend({ instance_id: instanceId }),
    async ({ instance_id, ...body }) => {
      const id = target(instance_id);
      return about(id, toolResultContent(await backend.file(id, body)));
    },
  );
  tool(
    'ubuntu_code_execute',
    'Execute code in a Jupyter kernel of an ubuntu instance (default python3); state persists between calls.',
    CodeExecuteRequest.extend({ instance_id: instanceId }),
    async ({ instance_id, ...body }) => {
      const id = target(instance_id);
      const r = await backend.codeExecute(id, body);
      const parts: Content[] = [text(`status: ${r.status}`)];
      if (r.stdout) parts.push(text(r.stdout));
      if (r.stderr) parts.push(text(`stderr: ${r.stderr}`));
      for (const o of r.outputs) {
        const data = (o as { data?: Record<string, unknown> }).data;
        if (o.output_type === 'stream') continue; // already in stdout/stderr
        if (typeof data?.['image/png'] === 'string') {
          parts.push({ type: 'image', data: data['image/png'], mimeType: 'image/png' });
        } else if (typeof data?.['text/plain'] === 'string') {
          parts.push(text(data['text/plain']));
        }
      }
      if (r.error) parts.push(text(`${r.error.ename}: ${r.error.evalue}`));
      const result = await about(id, parts);
      return r.status === 'ok' ? result : { ...result, isError: true };
    },
  );

  // --------------------------------------------------------------------------------------- auth

  async function applyAuth(id: string, nameOrId: string): Promise<string> {
    const states = await backend.listAuthStates();
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
    await backend.authenticate(id, state.id);
    return state.id;
  }

  tool(
    'auth_save',
    "Save the browser's cookies, localStorage and sessionStorage as an auth state.",
    z.object({
      name: z.string().min(1).optional().describe('Name of the auth state (default "default")'),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const saved = await backend.saveAuth(id, args.name);
      return about(id, [
        text(`Saved auth state ${saved.auth_state_id}${saved.name ? ` (${saved.name})` : ''}`),
      ]);
    },
  );
  tool(
    'auth_apply',
    'Load a saved auth state (by id or unique name) into the browser.',
    z.object({
      auth_state: z.string().min(1).describe('Auth state id or unique name'),
      instance_id: instanceId,
    }),
    async (args) => {
      const id = target(args.instance_id);
      const stateId = await applyAuth(id, args.auth_state);
      return about(id, [text(`Applied auth state ${stateId}`)]);
    },
  );
  tool(
    'auth_list',
    'List saved auth states.',
    z.object({}),
    async () => ({ content: [text(json(await backend.listAuthStates()))] }),
    { readOnlyHint: true },
  );

  const close = () =>
    (closed ??= (async () => {
      for (const p of pages.values())
        void p.then(
          (t) => t.close(),
          () => undefined,
        );
      pages.clear();
      const ids = started.splice(0);
      await Promise.all(ids.map((id) => backend.stop(id).catch(() => undefined)));
    })());

  return {
    server,
    get instances() {
      return [...started];
    },
    close,
  };
}
