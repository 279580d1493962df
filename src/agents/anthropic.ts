/**
 * Anthropic's computer-use tools (Claude's `computer_20250124` and `computer_20251124`, which adds
 * `zoom`; `bash_20250124`; the text editors `text_editor_20250124` / `_20250429` / `_20250728`)
 * mapped onto burrow's `computer`, `bash` and `edit` operations, and back:
 *
 * - `fromAnthropicComputer(input, scaler)`: the model's `computer` input → burrow actions;
 * - `toAnthropicComputer(action, scaler)`: a burrow action → the input the model would have sent
 *   (throws `UnsupportedActionError` naming what Claude's vocabulary cannot say);
 * - `anthropicAgent(target, options)`: the tool definitions to send and `toolResult(block)`,
 *   which runs a `tool_use` block and answers the `tool_result` block the next turn carries.
 *
 * Screen scaling follows Anthropic's guidance: a screen larger than the model takes (long edge
 * over 1568 px, or over about 1.15 megapixels) is declared at a scaled-down size, screenshots are
 * resized to it, and the model's coordinates are scaled back up before burrow acts.
 */
import type { ComputerAction, ToolResult } from '../api/index.js';
import {
  AnthropicBashInputSchema,
  AnthropicComputerInputSchema,
  AnthropicEditorInputSchema,
  parseToolInput,
} from './schemas.js';
import {
  Scaler,
  screenSize,
  UnsupportedActionError,
  type AgentTarget,
  type Size,
} from './target.js';

export type AnthropicComputerVersion = 'computer_20250124' | 'computer_20251124';
export type AnthropicEditorVersion =
  'text_editor_20250124' | 'text_editor_20250429' | 'text_editor_20250728';

import type {
  AnthropicBashInput,
  AnthropicComputerInput,
  AnthropicEditorInput,
} from './schemas.js';
export type { AnthropicBashInput, AnthropicComputerInput, AnthropicEditorInput };

export interface AnthropicToolUse {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}

export type AnthropicContent =
  | { type: 'text'; text: string }
  | { type: 'image'; source: { type: 'base64'; media_type: 'image/png'; data: string } };

export interface AnthropicToolResult {
  type: 'tool_result';
  tool_use_id: string;
  content: AnthropicContent[];
  is_error?: boolean;
}

/** Largest long edge and area Anthropic's docs give for screenshots the model sees unscaled. */
export const ANTHROPIC_MAX_LONG_EDGE = 1568;
export const ANTHROPIC_MAX_PIXELS = 1_150_000;

/** The size to declare to Claude for a `screen`: the same, or scaled down to the limits. */
export function anthropicDisplaySize(screen: Size): Size {
  const [w, h] = screen;
  const scale = Math.min(
    1,
    ANTHROPIC_MAX_LONG_EDGE / Math.max(w, h),
    Math.sqrt(ANTHROPIC_MAX_PIXELS / (w * h)),
  );
  return [Math.floor(w * scale), Math.floor(h * scale)];
}

/** One step burrow runs for a model action: a `computer` action, or a zoomed screenshot. */
export type BurrowStep = ComputerAction | { action: 'zoom'; region: readonly number[] };

const modifiers = (text: string | undefined) =>
  text
    ? text
        .split('+')
        .map((k) => k.trim())
        .filter(Boolean)
    : undefined;

function point(scaler: Scaler, c: unknown, action: string, field = 'coordinate'): [number, number] {
  if (!Array.isArray(c) || c.length !== 2 || !c.every((n) => Number.isFinite(n))) {
    throw new UnsupportedActionError('anthropic', action, `${field} must be [x, y]`);
  }
  return scaler.toScreen(c[0] as number, c[1] as number);
}

/**
 * The burrow steps for one `computer` input of the model (coordinates scaled to the screen).
 * `zoom` only with `computer_20251124`.
 */
export function fromAnthropicComputer(
  input: AnthropicComputerInput,
  scaler: Scaler,
  version: AnthropicComputerVersion = 'computer_20251124',
): BurrowStep[] {
  const a = input.action;
  const at = () => (input.coordinate ? { coordinates: point(scaler, input.coordinate, a) } : {});
  const hold = modifiers(input.text);
  const held = hold ? { hold_keys: hold } : {};
  const click = (button: 'left' | 'right' | 'middle', num_clicks = 1): BurrowStep[] => [
    { action: 'click_mouse', button, num_clicks, ...at(), ...held },
  ];
  switch (a) {
    case 'screenshot':
      return [{ action: 'take_screenshot' }];
    case 'left_click':
      return click('left');
    case 'right_click':
      return click('right');
    case 'middle_click':
      return click('middle');
    case 'double_click':
      return click('left', 2);
    case 'triple_click':
      return click('left', 3);
    case 'mouse_move':
      return [{ action: 'move_mouse', coordinates: point(scaler, input.coordinate, a) }];
    case 'left_click_drag':
      return [
        {
          action: 'drag_mouse',
          path: [
            point(scaler, input.start_coordinate, a, 'start_coordinate'),
            point(scaler, input.coordinate, a),
          ],
        },
      ];
    case 'left_mouse_down':
    case 'left_mouse_up':
      return [
        {
          action: 'click_mouse',
          button: 'left',
          click_type: a === 'left_mouse_down' ? 'down' : 'up',
          ...at(),
        },
      ];
    case 'scroll': {
      const n = input.scroll_amount ?? 1;
      if (!Number.isFinite(n) || n < 0) {
        throw new UnsupportedActionError('anthropic', a, 'scroll_amount must be a number ≥ 0');
      }
      const dir = input.scroll_direction;
      const delta =
        dir === 'down'
          ? { delta_y: n }
          : dir === 'up'
            ? { delta_y: -n }
            : dir === 'right'
              ? { delta_x: n }
              : dir === 'left'
                ? { delta_x: -n }
                : undefined;
      if (!delta) {
        throw new UnsupportedActionError('anthropic', a, `scroll_direction "${String(dir)}"`);
      }
      return [{ action: 'scroll', ...at(), ...delta, ...held }];
    }
    case 'type':
      return [{ action: 'type_text', text: input.text ?? '' }];
    case 'key': {
      // xdotool style: chords joined by "+", several chords separated by spaces
      const chords = (input.text ?? '').split(/\s+/).filter(Boolean);
      if (chords.length === 0) throw new UnsupportedActionError('anthropic', a, 'no key given');
      return chords.map((c) => ({ action: 'press_key', keys: modifiers(c)! }));
    }
    case 'hold_key':
      return [
        {
          action: 'press_key',
          keys: modifiers(input.text) ?? [],
          duration: input.duration ?? 0,
        },
      ];
    case 'wait':
      return [{ action: 'wait', duration: input.duration ?? 1 }];
    case 'cursor_position':
      return [{ action: 'get_cursor_position' }];
    case 'zoom':
      if (version !== 'computer_20251124') {
        throw new UnsupportedActionError('anthropic', a, `${version} has no zoom`);
      }
      if (!Array.isArray(input.region) || input.region.length !== 4) {
        throw new UnsupportedActionError('anthropic', a, 'region must be [x0, y0, x1, y1]');
      }
      return [{ action: 'zoom', region: input.region }];
    default:
      throw new UnsupportedActionError('anthropic', a);
  }
}

/**
 * The `computer` input Claude would send for a burrow action (coordinates scaled to the model's
 * screen). What Claude's vocabulary cannot express throws `UnsupportedActionError`.
 */
export function toAnthropicComputer(
  action: ComputerAction,
  scaler: Scaler,
): AnthropicComputerInput {
  const no = (detail: string): never => {
    throw new UnsupportedActionError('anthropic', action.action, detail);
  };
  const coord = (c: readonly [number, number]) => scaler.toModel(c[0], c[1]);
  const text = (keys: readonly string[] | undefined) =>
    keys && keys.length > 0 ? { text: keys.join('+') } : {};
  switch (action.action) {
    case 'move_mouse':
      if (action.hold_keys?.length) no('Claude cannot hold keys while moving the mouse');
      return { action: 'mouse_move', coordinate: coord(action.coordinates) };
    case 'click_mouse': {
      const at = action.coordinates ? { coordinate: coord(action.coordinates) } : {};
      const type = action.click_type ?? 'click';
      if (type !== 'click') {
        if (action.button !== 'left') no(`only the left button can be held (${action.button})`);
        if (action.hold_keys?.length) no('Claude cannot hold keys with a button down or up');
        return { action: type === 'down' ? 'left_mouse_down' : 'left_mouse_up', ...at };
      }
      const n = action.num_clicks ?? 1;
      const name =
        n === 1
          ? { left: 'left_click', right: 'right_click', middle: 'middle_click' }[
              action.button as string
            ]
          : action.button === 'left'
            ? { 2: 'double_click', 3: 'triple_click' }[n]
            : undefined;
      if (!name) no(`button ${action.button} × ${n}`);
      return { action: name!, ...at, ...text(action.hold_keys) };
    }
    case 'drag_mouse':
      if (action.path.length !== 2) no(`a drag is two points, not ${action.path.length}`);
      if (action.hold_keys?.length) no('Claude cannot hold keys while dragging');
      return {
        action: 'left_click_drag',
        start_coordinate: coord(action.path[0]!),
        coordinate: coord(action.path[1]!),
      };
    case 'scroll': {
      const dx = action.delta_x ?? 0;
      const dy = action.delta_y ?? 0;
      if (dx !== 0 && dy !== 0) no('Claude scrolls in one direction at a time');
      if (!action.coordinates) no('Claude scrolls at a coordinate');
      const [scroll_direction, scroll_amount] =
        dy > 0
          ? (['down', dy] as const)
          : dy < 0
            ? (['up', -dy] as const)
            : dx < 0
              ? (['left', -dx] as const)
              : (['right', dx] as const);
      return {
        action: 'scroll',
        coordinate: coord(action.coordinates!),
        scroll_direction,
        scroll_amount,
        ...text(action.hold_keys),
      };
    }
    case 'press_key':
      return action.duration !== undefined && action.duration > 0
        ? { action: 'hold_key', text: action.keys.join('+'), duration: action.duration }
        : { action: 'key', text: action.keys.join('+') };
    case 'type_text':
      if (action.hold_keys?.length) no('Claude cannot hold keys while typing');
      return { action: 'type', text: action.text };
    case 'wait':
      return { action: 'wait', duration: action.duration };
    case 'take_screenshot':
      return { action: 'screenshot' };
    case 'get_cursor_position':
      return { action: 'cursor_position' };
  }
}

export interface AnthropicAgentOptions {
  /** Default `computer_20251124`. */
  computer?: AnthropicComputerVersion;
  /** Offer `zoom` (computer_20251124 only). Default true there. */
  enableZoom?: boolean;
  /** Default `text_editor_20250728`. */
  editor?: AnthropicEditorVersion;
  /** Size declared to the model; default `anthropicDisplaySize(screen)`. */
  display?: Size;
  /** The bash session the `bash` tool uses (one persistent shell, as Claude expects). Default 1. */
  bashSession?: number;
}

/** Tool definitions for the Messages API (`tools: [...]`), as Anthropic documents them. */
export type AnthropicToolDefinition =
  | {
      type: AnthropicComputerVersion;
      name: 'computer';
      display_width_px: number;
      display_height_px: number;
      enable_zoom?: boolean;
    }
  | { type: 'bash_20250124'; name: 'bash' }
  | {
      type: AnthropicEditorVersion;
      name: 'str_replace_editor' | 'str_replace_based_edit_tool';
    };

export interface AnthropicAgent {
  readonly scaler: Scaler;
  /** The beta header the computer tool version needs. */
  readonly betaHeader: string;
  readonly tools: AnthropicToolDefinition[];
  /** Runs one tool_use block; failures are `is_error` results naming what failed. */
  toolResult(call: AnthropicToolUse): Promise<AnthropicToolResult>;
}

const EDITOR_NAMES = ['str_replace_editor', 'str_replace_based_edit_tool'];

export async function anthropicAgent(
  target: AgentTarget,
  options: AnthropicAgentOptions = {},
): Promise<AnthropicAgent> {
  const version = options.computer ?? 'computer_20251124';
  const editor = options.editor ?? 'text_editor_20250728';
  const screen = await screenSize(target);
  const scaler = new Scaler(screen, options.display ?? anthropicDisplaySize(screen));
  const zoom = version === 'computer_20251124' && (options.enableZoom ?? true);
  const bashSession = options.bashSession ?? 1;

  const tools: AnthropicToolDefinition[] = [
    {
      type: version,
      name: 'computer',
      display_width_px: scaler.model[0],
      display_height_px: scaler.model[1],
      ...(zoom && { enable_zoom: true }),
    },
  ];
  if (target.bash) tools.push({ type: 'bash_20250124', name: 'bash' });
  if (target.edit) {
    tools.push({
      type: editor,
      name:
        editor === 'text_editor_20250124' ? 'str_replace_editor' : 'str_replace_based_edit_tool',
    });
  }

  const image = (data: string): AnthropicContent => ({
    type: 'image',
    source: { type: 'base64', media_type: 'image/png', data },
  });
  const text = (t: string): AnthropicContent => ({ type: 'text', text: t });

  async function computer(input: AnthropicComputerInput): Promise<AnthropicContent[]> {
    if (input.action === 'zoom' && !zoom) {
      throw new UnsupportedActionError('anthropic', 'zoom', 'zoom is not enabled');
    }
    const steps = fromAnthropicComputer(input, scaler, version);
    const out: AnthropicContent[] = [];
    for (const [i, step] of steps.entries()) {
      const last = i === steps.length - 1;
      if (step.action === 'zoom') {
        const shot = (await target.screenshot()).toString('base64');
        out.push(image(await scaler.zoom(shot, step.region)));
        continue;
      }
      const r: ToolResult = await target.computer({ ...step, screenshot: last } as ComputerAction);
      if (r.error) throw new Error(r.error);
      if (step.action === 'get_cursor_position' && r.output) {
        const m = /X=(-?\d+),\s*Y=(-?\d+)/.exec(r.output);
        const [x, y] = m ? scaler.toModel(Number(m[1]), Number(m[2])) : [NaN, NaN];
        out.push(text(m ? `X=${x},Y=${y}` : r.output));
      } else if (r.output) {
        out.push(text(r.output));
      }
      if (last && r.base64_image) out.push(image(await scaler.image(r.base64_image)));
    }
    return out;
  }

  async function bash(input: AnthropicBashInput): Promise<AnthropicContent[]> {
    if (!target.bash)
      throw new Error('bash needs a target made with agentTarget(client, instance)');
    const r = await target.bash(
      input.restart
        ? { restart: true, session: bashSession }
        : { command: input.command ?? '', session: bashSession },
    );
    const parts = [r.output, r.error, r.system].filter((s): s is string => !!s);
    return [text(parts.join('\n') || (input.restart ? 'tool has been restarted' : ''))];
  }

  async function edit(input: AnthropicEditorInput): Promise<AnthropicContent[]> {
    if (!target.edit)
      throw new Error('the editor needs a target made with agentTarget(client, instance)');
    const { insert_text, ...rest } = input;
    if (input.command === 'undo_edit' && editor !== 'text_editor_20250124') {
      throw new UnsupportedActionError('anthropic', 'undo_edit', `${editor} has no undo_edit`);
    }
    const r = await target.edit({
      ...rest,
      ...(insert_text !== undefined && rest.new_str === undefined && { new_str: insert_text }),
    });
    if (r.error) throw new Error(r.error);
    return [text(r.output ?? '')];
  }

  return {
    scaler,
    betaHeader:
      version === 'computer_20251124' ? 'computer-use-2025-11-24' : 'computer-use-2025-01-24',
    tools,
    async toolResult(call) {
      try {
        // the model's input is parsed before anything runs: a malformed one is an error result
        const content =
          call.name === 'computer'
            ? await computer(parseToolInput(AnthropicComputerInputSchema, call.input, call.name))
            : call.name === 'bash'
              ? await bash(parseToolInput(AnthropicBashInputSchema, call.input, call.name))
              : EDITOR_NAMES.includes(call.name)
                ? await edit(parseToolInput(AnthropicEditorInputSchema, call.input, call.name))
                : (() => {
                    throw new Error(`unknown tool "${call.name}"`);
                  })();
        return { type: 'tool_result', tool_use_id: call.id, content };
      } catch (err) {
        return {
          type: 'tool_result',
          tool_use_id: call.id,
          content: [text(err instanceof Error ? err.message : String(err))],
          is_error: true,
        };
      }
    },
  };
}
