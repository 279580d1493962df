/**
 * Computer actions (COMPAT.md "computer actions"), run the same way on every instance type:
 *
 * - one action at a time per instance, in the order they arrive;
 * - key names (`keys`, `hold_keys`, chords such as `ctrl+c`) are checked before any input is
 *   sent: an unknown name fails the action and nothing is pressed;
 * - a tool failure (`ToolFailure`) ends the action and is reported in `error`; any other error
 *   is a fault of the server and propagates;
 * - unless the action says `screenshot: false`, a screenshot follows, also after a failure, and
 *   after an action that may have changed the screen the device gets its `settleMs` first; a
 *   screenshot that fails as a tool failure is reported in `error` too, without an image.
 *
 * How input reaches the screen is what differs between the types, and only that: the
 * `ComputerDevice` (CDP `Input.*` on a browser tab, xdotool on an X display).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MouseButton, ParsedComputerAction, ToolResult } from '../../api/index.js';
import { SerialQueue } from '../../internal/serial.js';
import { reportFailure, ToolFailure } from './failure.js';
import { expandKeys } from './keys.js';

/** `[x, y]` in pixels of the screen (or viewport), as the request gives them. */
export type Point = readonly [number, number];

/** A click of `click_mouse`, its defaults filled in. */
export interface Click {
  button: MouseButton;
  /** A whole click (press and release, `count` times), or only the press or the release. */
  kind: 'click' | 'down' | 'up';
  count: number;
  /** Where to move first; absent: where the pointer is. */
  at?: Point | undefined;
}

/** A `scroll`, its defaults filled in. */
export interface Scroll {
  /** Where to move first; absent: where the pointer is. */
  at?: Point | undefined;
  /** Wheel notches as requested (not rounded: each device rounds as its wheel needs). */
  deltaX: number;
  deltaY: number;
}

/**
 * The primitives one instance type provides. `K` is its notion of a key (a DOM key definition,
 * an X keysym name). `hold` is the keys to keep pressed around the primitive, already resolved;
 * the device presses and releases them as its input channel allows, released even on failure.
 * A primitive reports a failure the caller should see by throwing a `ToolFailure`.
 */
export interface ComputerDevice<K> {
  /** The key of one key name (a chord's part, any case, aliases included); `undefined` if none. */
  key(name: string): K | undefined;
  move(to: Point, hold: readonly K[]): Promise<void>;
  click(click: Click, hold: readonly K[]): Promise<void>;
  /** Left button pressed at the first point, moved along the rest, released at the last. */
  drag(path: readonly Point[], hold: readonly K[]): Promise<void>;
  scroll(scroll: Scroll, hold: readonly K[]): Promise<void>;
  /** `keys` pressed together, held `holdMs` (0: pressed and released at once). */
  press(keys: readonly K[], holdMs: number): Promise<void>;
  type(text: string, hold: readonly K[]): Promise<void>;
  /** Where the pointer is. */
  cursor(): Promise<Point>;
  /** PNG of what the action's screenshot shows. */
  screenshot(): Promise<Buffer>;
  /** Pause before the screenshot of an action that may have changed the screen, in ms. */
  readonly settleMs: number;
}

/** Actions after which the screen may have changed. */
const changesScreen = (a: ParsedComputerAction) =>
  a.action !== 'take_screenshot' && a.action !== 'get_cursor_position' && a.action !== 'wait';

/** Key entries (chords expanded) as the device's keys; an unknown name is a tool failure. */
export function resolveKeys<K>(
  entries: readonly string[],
  key: (name: string) => K | undefined,
): K[] {
  return expandKeys(entries).map((name) => {
    const k = key(name);
    if (k === undefined) throw new ToolFailure(`Unknown key name '${name}'`);
    return k;
  });
}

/** Runs computer actions on one device, one at a time. */
export class ComputerRunner<K> {
  readonly #device: ComputerDevice<K>;
  readonly #queue = new SerialQueue();

  constructor(device: ComputerDevice<K>) {
    this.#device = device;
  }

  /** Runs `action` once the actions before it are done; a tool failure comes back in `error`. */
  run(action: ParsedComputerAction): Promise<ToolResult> {
    return this.#queue.run(async () => {
      const result = await reportFailure(async (): Promise<ToolResult> => {
        const output = await this.#act(action);
        return output === undefined ? {} : { output };
      });
      if (action.screenshot ?? true) {
        const settle = this.#device.settleMs;
        if (result.error === undefined && changesScreen(action) && settle > 0) await sleep(settle);
        try {
          result.base64_image = (await this.#device.screenshot()).toString('base64');
        } catch (err) {
          if (!(err instanceof ToolFailure)) throw err;
          result.error =
            result.error === undefined ? err.message : `${result.error}; ${err.message}`;
        }
      }
      return result;
    });
  }

  async #act(a: ParsedComputerAction): Promise<string | undefined> {
    const d = this.#device;
    const keys = (entries: readonly string[] | undefined) =>
      resolveKeys(entries ?? [], (name) => d.key(name));
    switch (a.action) {
      case 'move_mouse':
        return d.move(a.coordinates, keys(a.hold_keys)).then(nothing);
      case 'click_mouse': {
        const click = {
          button: a.button,
          kind: a.click_type ?? 'click',
          count: a.num_clicks ?? 1,
          at: a.coordinates,
        };
        return d.click(click, keys(a.hold_keys)).then(nothing);
      }
      case 'drag_mouse':
        return d.drag(a.path, keys(a.hold_keys)).then(nothing);
      case 'scroll': {
        const scroll = { at: a.coordinates, deltaX: a.delta_x ?? 0, deltaY: a.delta_y ?? 0 };
        return d.scroll(scroll, keys(a.hold_keys)).then(nothing);
      }
      case 'press_key':
        return d.press(keys(a.keys), (a.duration ?? 0) * 1000).then(nothing);
      case 'type_text':
        return d.type(a.text, keys(a.hold_keys)).then(nothing);
      case 'wait':
        await sleep(a.duration * 1000);
        return undefined;
      case 'take_screenshot':
        return undefined;
      case 'get_cursor_position': {
        const [x, y] = await d.cursor();
        return `X=${x},Y=${y}`;
      }
    }
  }
}

const nothing = (): undefined => undefined;
