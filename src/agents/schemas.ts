/**
 * The inputs a model sends to the vendor tools, as zod schemas: a tool call is parsed before
 * anything runs, so a malformed one (a string where a number belongs, a missing path) becomes an
 * error result naming the field, which the model reads and corrects, instead of a crash deep in
 * the mapping. The schemas accept what the vendors document and drop fields they do not know.
 */
import { z } from 'zod';
import { UnsupportedActionError } from './target.js';

// The inputs' types are written out here (and re-exported by anthropic.ts and openai.ts) so that
// each schema is checked against the type the mapping reads.

/** The `input` of a `computer` tool_use block. */
export interface AnthropicComputerInput {
  action: string;
  coordinate?: [number, number] | undefined;
  start_coordinate?: [number, number] | undefined;
  text?: string | undefined;
  scroll_direction?: 'up' | 'down' | 'left' | 'right' | undefined;
  scroll_amount?: number | undefined;
  duration?: number | undefined;
  /** `zoom` (computer_20251124): `[x0, y0, x1, y1]`. */
  region?: [number, number, number, number] | undefined;
}

export interface AnthropicBashInput {
  command?: string | undefined;
  restart?: boolean | undefined;
}

export interface AnthropicEditorInput {
  command: 'view' | 'create' | 'str_replace' | 'insert' | 'undo_edit';
  path: string;
  file_text?: string | undefined;
  view_range?: [number, number] | undefined;
  old_str?: string | undefined;
  new_str?: string | undefined;
  insert_line?: number | undefined;
  /** text_editor_20250728's name for the inserted text. */
  insert_text?: string | undefined;
}

type Keys = { keys?: string[] | undefined };
/** One action of an OpenAI `computer_call`. */
export type OpenAIComputerAction =
  | ({
      type: 'click';
      x: number;
      y: number;
      button?: 'left' | 'right' | 'wheel' | 'back' | 'forward' | undefined;
    } & Keys)
  | ({ type: 'double_click'; x: number; y: number } & Keys)
  | ({ type: 'drag'; path: { x: number; y: number }[] } & Keys)
  | { type: 'keypress'; keys: string[] }
  | ({ type: 'move'; x: number; y: number } & Keys)
  | ({ type: 'scroll'; x: number; y: number; scroll_x: number; scroll_y: number } & Keys)
  | { type: 'type'; text: string }
  | { type: 'wait'; ms?: number | undefined }
  | { type: 'screenshot' };

const point = z.tuple([z.number(), z.number()]);

export const AnthropicComputerInputSchema = z.object({
  action: z.string(),
  coordinate: point.optional(),
  start_coordinate: point.optional(),
  text: z.string().optional(),
  scroll_direction: z.enum(['up', 'down', 'left', 'right']).optional(),
  scroll_amount: z.number().optional(),
  duration: z.number().optional(),
  region: z.tuple([z.number(), z.number(), z.number(), z.number()]).optional(),
}) satisfies z.ZodType<AnthropicComputerInput>;

export const AnthropicBashInputSchema = z.object({
  command: z.string().optional(),
  restart: z.boolean().optional(),
}) satisfies z.ZodType<AnthropicBashInput>;

export const AnthropicEditorInputSchema = z.object({
  command: z.enum(['view', 'create', 'str_replace', 'insert', 'undo_edit']),
  path: z.string(),
  file_text: z.string().optional(),
  view_range: z.tuple([z.int(), z.int()]).optional(),
  old_str: z.string().optional(),
  new_str: z.string().optional(),
  insert_line: z.int().optional(),
  insert_text: z.string().optional(),
}) satisfies z.ZodType<AnthropicEditorInput>;

/** `input` parsed by `schema`, or an error naming the tool and what is wrong with it. */
export function parseToolInput<T>(schema: z.ZodType<T>, input: unknown, tool: string): T {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new Error(`invalid input for the ${tool} tool: ${z.prettifyError(r.error)}`);
}

const keys = { keys: z.array(z.string()).optional() };
const xy = { x: z.number(), y: z.number() };

/** One schema per OpenAI action type (the `type` field picks it). */
const OPENAI_ACTIONS = {
  click: z.object({
    type: z.literal('click'),
    ...xy,
    button: z.enum(['left', 'right', 'wheel', 'back', 'forward']).optional(),
    ...keys,
  }),
  double_click: z.object({ type: z.literal('double_click'), ...xy, ...keys }),
  drag: z.object({ type: z.literal('drag'), path: z.array(z.object(xy)), ...keys }),
  keypress: z.object({ type: z.literal('keypress'), keys: z.array(z.string()) }),
  move: z.object({ type: z.literal('move'), ...xy, ...keys }),
  scroll: z.object({
    type: z.literal('scroll'),
    ...xy,
    scroll_x: z.number(),
    scroll_y: z.number(),
    ...keys,
  }),
  type: z.object({ type: z.literal('type'), text: z.string() }),
  wait: z.object({ type: z.literal('wait'), ms: z.number().min(0).optional() }),
  screenshot: z.object({ type: z.literal('screenshot') }),
} satisfies Record<OpenAIComputerAction['type'], z.ZodType<OpenAIComputerAction>>;

/**
 * One action of a `computer_call`, checked against its type's schema. An unknown type, or fields
 * that do not fit it, throw `UnsupportedActionError` naming the action.
 */
export function parseOpenAIAction(raw: unknown): OpenAIComputerAction {
  const type =
    typeof raw === 'object' && raw !== null ? (raw as { type?: unknown }).type : undefined;
  const schema =
    typeof type === 'string' && Object.hasOwn(OPENAI_ACTIONS, type)
      ? OPENAI_ACTIONS[type as keyof typeof OPENAI_ACTIONS]
      : undefined;
  if (!schema) throw new UnsupportedActionError('openai', String(type));
  const r = (schema as z.ZodType<OpenAIComputerAction>).safeParse(raw);
  if (!r.success)
    throw new UnsupportedActionError('openai', type as string, z.prettifyError(r.error));
  return r.data;
}
