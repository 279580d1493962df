/**
 * What every tool module shares: the shape of a tool (a value: name, description, zod input
 * schema, annotations and `handler(ctx, input)`), the argument schemas several tools take, and
 * the ways a result is written.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { ToolResult } from '../../../api/index.js';
import { text, type Content, type McpContext } from '../context.js';
import type { PageState, PageTools } from '../page.js';

export { text, type Content };

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
}

/** One MCP tool. The MCP server validates the input against `input` before `handler` runs. */
export interface McpTool<S extends z.ZodObject = z.ZodObject> {
  readonly name: string;
  readonly description: string;
  readonly input: S;
  readonly annotations?: ToolAnnotations;
  handler(ctx: McpContext, input: z.output<S>): Promise<CallToolResult>;
}

/** A tool as the registry holds it (its input type erased). */
export interface AnyMcpTool {
  readonly name: string;
  readonly description: string;
  readonly input: z.ZodObject;
  readonly annotations?: ToolAnnotations;
  handler(ctx: McpContext, input: unknown): Promise<CallToolResult>;
}

/** A tool value, typed against its own schema and erased for the list. */
export function defineTool<S extends z.ZodObject>(tool: McpTool<S>): AnyMcpTool {
  return tool as unknown as AnyMcpTool;
}

export const instanceId = z
  .string()
  .min(1)
  .optional()
  .describe('Instance to act on; default: the instance this MCP session started last');
export const element = z
  .string()
  .describe(
    'Human-readable element description used to obtain permission to interact with the element',
  );
export const ref = z.string().describe('Exact target element reference from the page snapshot');

export const json = (v: unknown) => JSON.stringify(v, null, 2);

/**
 * The page as the agent reads it after an action: URL, title and the snapshot, preceded by the
 * dialogs and file choosers waiting for an answer (while a dialog is open there is no snapshot:
 * the page runs nothing until it is answered).
 */
export const pageState = (s: PageState): Content => {
  const modal = s.modal.length > 0 ? `### Modal state\n${s.modal.join('\n')}\n\n` : '';
  const snapshot = s.snapshot ? `\n- Page Snapshot:\n\`\`\`yaml\n${s.snapshot}\n\`\`\`` : '';
  return text(`${modal}### Page state\n- Page URL: ${s.url}\n- Page Title: ${s.title}${snapshot}`);
};

/**
 * The instance and browser tools of a `browser_*` call: the instance named, else the session's
 * last, else one started now. Unless `dialogOk`, a tab whose dialog waits refuses the call.
 */
export async function browser(
  ctx: McpContext,
  instance_id: string | undefined,
  { dialogOk = false } = {},
): Promise<{ id: string; page: PageTools }> {
  const id = await ctx.browserTarget(instance_id);
  const page = await ctx.page(id);
  if (!dialogOk) page.assertNoDialog();
  return { id, page };
}

/** A `ToolResult` of the API (bash, edit, file, computer) as MCP content. */
export const toolResultContent = (r: ToolResult): Content[] => {
  const out: Content[] = [];
  if (r.output) out.push(text(r.output));
  if (r.error) out.push(text(`error: ${r.error}`));
  if (r.system) out.push(text(`system: ${r.system}`));
  if (r.base64_image) out.push({ type: 'image', data: r.base64_image, mimeType: 'image/png' });
  if (out.length === 0) out.push(text('done'));
  return out;
};
