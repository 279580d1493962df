/**
 * OpenAI's computer-use actions (the Responses API `computer_call`: `click` with its buttons,
 * `double_click`, `drag` along a path, `keypress`, `move`, `scroll` by pixels at x/y, `type`,
 * `wait`, `screenshot`; one `action`, or a batch in `actions`) mapped onto burrow's `computer`
 * actions, and back:
 *
 * - `fromOpenAIAction(action, scaler)` / `toOpenAIAction(action, scaler)`: the pure mappings
 *   (the latter throws `UnsupportedActionError` for what the vocabulary cannot say);
 * - `openaiAgent(target, options)`: the tool definition and `toolResult(call)`, which runs a
 *   `computer_call` and answers the `computer_call_output` carrying a screenshot.
 *
 * Screen scaling: the model works in the display size its tool declares (`display_width` /
 * `display_height`); burrow scales coordinates from it to the instance's screen and resizes
 * screenshots to it. By default the declared size is the screen's own.
 */
import type { ComputerAction } from '../api/index.js';
import { parseOpenAIAction } from './schemas.js';
import {
  Scaler,
  screenSize,
  UnsupportedActionError,
  type AgentTarget,
  type Size,
} from './target.js';

import type { OpenAIComputerAction } from './schemas.js';
export type { OpenAIComputerAction };

export interface OpenAISafetyCheck {
  id: string;
  code?: string;
  message?: string;
}

/** A `computer_call` output item of the Responses API. */
export interface OpenAIComputerCall {
  type: 'computer_call';
  call_id: string;
  id?: string;
  /** computer-use-preview: one action. */
  action?: OpenAIComputerAction;
  /** The GA `computer` tool: a batch, run in order. */
  actions?: OpenAIComputerAction[];
  pending_safety_checks?: OpenAISafetyCheck[];
  status?: string;
}

/** The `computer_call_output` input item answering a call. */
export interface OpenAIComputerCallOutput {
  type: 'computer_call_output';
  call_id: string;
  output: { type: 'computer_screenshot'; image_url: string };
  acknowledged_safety_checks?: OpenAISafetyCheck[];
}

/** Pixels per burrow wheel notch (src/server/chromium/input.ts scrolls 100 px a notch). */
export const PIXELS_PER_NOTCH = 100;
/** What OpenAI's `wait` without a duration waits, in seconds (its docs: about two). */
const DEFAULT_WAIT_S = 2;

const notches = (px: number) =>
  px === 0 ? 0 : Math.sign(px) * Math.max(1, Math.round(Math.abs(px) / PIXELS_PER_NOTCH));

/** The burrow action for one OpenAI action (coordinates scaled to the screen). */
export function fromOpenAIAction(a: OpenAIComputerAction, scaler: Scaler): ComputerAction {
  const held = 'keys' in a && a.keys?.length && a.type !== 'keypress' ? { hold_keys: a.keys } : {};
  const at = (x: number, y: number, what: string): [number, number] => {
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      throw new UnsupportedActionError('openai', what, 'x and y must be numbers');
    }
    return scaler.toScreen(x, y);
  };
  switch (a.type) {
    case 'click': {
      const b = a.button ?? 'left';
      const button = b === 'wheel' ? 'middle' : b;
      if (!['left', 'right', 'middle', 'back', 'forward'].includes(button)) {
        throw new UnsupportedActionError('openai', 'click', `button "${String(b)}"`);
      }
      return { action: 'click_mouse', button, coordinates: at(a.x, a.y, a.type), ...held };
    }
    case 'double_click':
      return {
        action: 'click_mouse',
        button: 'left',
        num_clicks: 2,
        coordinates: at(a.x, a.y, a.type),
        ...held,
      };
    case 'drag':
      if (!Array.isArray(a.path) || a.path.length === 0) {
        throw new UnsupportedActionError('openai', 'drag', 'an empty path');
      }
      return { action: 'drag_mouse', path: a.path.map((p) => at(p.x, p.y, a.type)), ...held };
    case 'keypress':
      return { action: 'press_key', keys: a.keys };
    case 'move':
      return { action: 'move_mouse', coordinates: at(a.x, a.y, a.type), ...held };
    case 'scroll':
      return {
        action: 'scroll',
        coordinates: at(a.x, a.y, a.type),
        delta_x: notches(a.scroll_x ?? 0),
        delta_y: notches(a.scroll_y ?? 0),
        ...held,
      };
    case 'type':
      return { action: 'type_text', text: a.text };
    case 'wait':
      return { action: 'wait', duration: a.ms !== undefined ? a.ms / 1000 : DEFAULT_WAIT_S };
    case 'screenshot':
      return { action: 'take_screenshot' };
    default:
      throw new UnsupportedActionError('openai', String((a as { type?: unknown }).type));
  }
}

/**
 * The OpenAI action the model would have sent for a burrow action (coordinates scaled to the
 * model's display). What OpenAI's vocabulary cannot express throws `UnsupportedActionError`.
 */
export function toOpenAIAction(action: ComputerAction, scaler: Scaler): OpenAIComputerAction {
  const no = (detail: string): never => {
    throw new UnsupportedActionError('openai', action.action, detail);
  };
  const xy = (c: readonly [number, number]) => {
    const [x, y] = scaler.toModel(c[0], c[1]);
    return { x, y };
  };
  const keys = (k: readonly string[] | undefined) => (k && k.length > 0 ? { keys: [...k] } : {});
  switch (action.action) {
    case 'move_mouse':
      return { type: 'move', ...xy(action.coordinates), ...keys(action.hold_keys) };
    case 'click_mouse': {
      if ((action.click_type ?? 'click') !== 'click') no('OpenAI has no button down or up');
      if (!action.coordinates) no('OpenAI clicks at x/y');
      const n = action.num_clicks ?? 1;
      if (n === 2 && action.button === 'left') {
        return { type: 'double_click', ...xy(action.coordinates!), ...keys(action.hold_keys) };
      }
      if (n !== 1) no(`button ${action.button} × ${n}`);
      const button = action.button === 'middle' ? 'wheel' : action.button;
      return { type: 'click', button, ...xy(action.coordinates!), ...keys(action.hold_keys) };
    }
    case 'drag_mouse':
      return { type: 'drag', path: action.path.map(xy), ...keys(action.hold_keys) };
    case 'scroll':
      if (!action.coordinates) no('OpenAI scrolls at x/y');
      return {
        type: 'scroll',
        ...xy(action.coordinates!),
        scroll_x: (action.delta_x ?? 0) * PIXELS_PER_NOTCH,
        scroll_y: (action.delta_y ?? 0) * PIXELS_PER_NOTCH,
        ...keys(action.hold_keys),
      };
    case 'press_key':
      if (action.duration) no('OpenAI cannot hold keys for a time');
      return { type: 'keypress', keys: [...action.keys] };
    case 'type_text':
      if (action.hold_keys?.length) no('OpenAI cannot hold keys while typing');
      return { type: 'type', text: action.text };
    case 'wait':
      return { type: 'wait', ms: Math.round(action.duration * 1000) };
    case 'take_screenshot':
      return { type: 'screenshot' };
    case 'get_cursor_position':
      return no('OpenAI has no action that reads the pointer position');
  }
}

export interface OpenAIAgentOptions {
  /** The size declared to the model; default the screen's. */
  display?: Size;
  /** `environment` of the tool definition. Default `browser` on browser instances, else `linux`. */
  environment?: 'browser' | 'linux' | 'mac' | 'windows' | 'ubuntu';
  /**
   * Acknowledge the call's `pending_safety_checks` in the output (only after a person approved
   * them, as OpenAI asks). Default false: a call with pending checks is refused.
   */
  acknowledgeSafetyChecks?: boolean;
}

export interface OpenAIAgent {
  readonly scaler: Scaler;
  /** For `tools: [...]`: the `computer_use_preview` definition with the declared display. */
  readonly tool: {
    type: 'computer_use_preview';
    display_width: number;
    display_height: number;
    environment: string;
  };
  /**
   * The GA built-in `computer` tool (gpt-5.4 and later) takes no display size: the model works in
   * the pixels of the screenshots it gets, which `toolResult` sends at the declared display size,
   * so the same scaling holds.
   */
  readonly gaTool: { type: 'computer' };
  /** Runs the call's action(s) in order, then answers with a screenshot. */
  toolResult(call: OpenAIComputerCall): Promise<OpenAIComputerCallOutput>;
}

export async function openaiAgent(
  target: AgentTarget,
  options: OpenAIAgentOptions = {},
): Promise<OpenAIAgent> {
  const screen = await screenSize(target);
  const scaler = new Scaler(screen, options.display ?? screen);
  const instance = target.instance as { instance_type?: string } | undefined;
  const environment =
    options.environment ?? (instance?.instance_type === 'ubuntu' ? 'linux' : 'browser');
  return {
    scaler,
    tool: {
      type: 'computer_use_preview',
      display_width: scaler.model[0],
      display_height: scaler.model[1],
      environment,
    },
    gaTool: { type: 'computer' },
    async toolResult(call) {
      const pending = call.pending_safety_checks ?? [];
      if (pending.length > 0 && !options.acknowledgeSafetyChecks) {
        throw new Error(
          `computer_call ${call.call_id} has pending safety checks (${pending.map((c) => c.code ?? c.id).join(', ')}); a person must approve them (acknowledgeSafetyChecks)`,
        );
      }
      const raw: unknown = call.actions ?? (call.action ? [call.action] : []);
      if (!Array.isArray(raw)) throw new Error('computer_call: actions must be an array');
      // parse and map every action first: a malformed or unsupported one fails the call before
      // anything runs
      const steps = raw.map((a: unknown) => fromOpenAIAction(parseOpenAIAction(a), scaler));
      for (const step of steps) {
        if (step.action === 'take_screenshot') continue; // the answer carries one anyway
        const r = await target.computer({ ...step, screenshot: false });
        if (r.error) throw new Error(`${step.action}: ${r.error}`);
      }
      const shot = (await target.screenshot()).toString('base64');
      return {
        type: 'computer_call_output',
        call_id: call.call_id,
        output: {
          type: 'computer_screenshot',
          image_url: `data:image/png;base64,${await scaler.image(shot)}`,
        },
        ...(pending.length > 0 && { acknowledged_safety_checks: pending }),
      };
    },
  };
}
