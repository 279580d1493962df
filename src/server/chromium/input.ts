/**
 * Computer actions on a browser instance (COMPAT.md "computer actions"): the device that applies
 * them to the active tab through CDP `Input.*` (../computer/runner.ts runs the actions), with the
 * one keyboard and mouse of this folder (keyboard.ts, mouse.ts). Coordinates are CSS pixels of
 * the tab's viewport, the same coordinate system as its screenshots. The mouse position is
 * remembered between actions (CDP has no pointer of its own) so that `get_cursor_position`,
 * clicks without coordinates and scrolls land where the last action left the pointer.
 */
import { ToolFailure } from '../computer/failure.js';
import { lookupKey, MODIFIER_BITS, type KeyDef } from '../computer/keys.js';
import type { Click, ComputerDevice, Point, Scroll } from '../computer/runner.js';
import { CdpError } from './cdp.js';
import { Keyboard, sendInput, type PageTarget } from './keyboard.js';
import { Mouse, type MouseEventParams } from './mouse.js';

export type { PageTarget };

export interface CdpComputerOptions {
  /** The active tab, attached (resolved anew for every action: tabs come and go). */
  page(): Promise<PageTarget>;
  /** PNG of the active tab's viewport, as `screenshot` returns it. */
  screenshot(): Promise<Buffer>;
  /** Viewport size `[width, height]` in CSS pixels; coordinates are clamped to it. */
  resolution: readonly [number, number];
}

/** Pixels one wheel notch scrolls (Chromium's wheel tick on Linux is of that order). */
export const PIXELS_PER_NOTCH = 100;
/**
 * The computer device of a browser instance (computer/runner.ts runs the actions): input to the
 * active tab through CDP `Input.*`. A CDP command that fails (a tab gone, a page stuck past the
 * deadline) is a tool failure; the live-view methods below share the pointer but not that.
 */
export class CdpComputer implements ComputerDevice<KeyDef> {
  readonly #opts: CdpComputerOptions;
  readonly #mouse: Mouse;
  /** The screenshot follows the input without a pause. */
  readonly settleMs = 0;

  constructor(opts: CdpComputerOptions) {
    this.#opts = opts;
    const [w, h] = opts.resolution;
    this.#mouse = new Mouse([Math.floor(w / 2), Math.floor(h / 2)]);
  }

  key(name: string): KeyDef | undefined {
    return lookupKey(name);
  }

  move(to: Point, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, (page, keys) => this.#move(page, to, keys));
  }

  click(c: Click, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, async (page, keys) => {
      const mouse = this.#mouse;
      if (c.at) await this.#move(page, c.at, keys);
      if (c.kind === 'down') return mouse.button(page, 'mousePressed', c.button, 1, keys.modifiers);
      if (c.kind === 'up') return mouse.button(page, 'mouseReleased', c.button, 1, keys.modifiers);
      await mouse.click(page, c.button, c.count, keys.modifiers);
    });
  }

  drag(path: readonly Point[], hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, async (page, keys) => {
      const [first, ...rest] = path;
      await this.#move(page, first!, keys);
      await this.#mouse.button(page, 'mousePressed', 'left', 1, keys.modifiers);
      try {
        for (const p of rest) await this.#move(page, p, keys);
      } finally {
        await this.#mouse.button(page, 'mouseReleased', 'left', 1, keys.modifiers);
      }
    });
  }

  scroll(s: Scroll, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, async (page, keys) => {
      if (s.at) await this.#move(page, s.at, keys);
      const deltaX = Math.round(s.deltaX) * PIXELS_PER_NOTCH;
      const deltaY = Math.round(s.deltaY) * PIXELS_PER_NOTCH;
      if (deltaX === 0 && deltaY === 0) return;
      await this.#mouse.wheel(page, deltaX, deltaY, keys.modifiers);
    });
  }

  press(keys: readonly KeyDef[], holdMs: number): Promise<void> {
    return cdpFailures(async () => new Keyboard(await this.#opts.page()).press(keys, holdMs));
  }

  type(text: string, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, (_page, keys) => keys.type(text));
  }

  cursor(): Promise<Point> {
    return Promise.resolve([this.#mouse.x, this.#mouse.y]);
  }

  screenshot(): Promise<Buffer> {
    return this.#opts.screenshot();
  }

  /**
   * Sends one live-view input event to `page` (default: the active tab), keeping the remembered
   * pointer in step with what the viewer does.
   */
  async dispatchMouse(params: MouseEventParams, page?: PageTarget): Promise<void> {
    const [x, y] = this.#clamp([params.x, params.y]);
    await this.#mouse.dispatch(page ?? (await this.#opts.page()), { ...params, x, y });
  }

  /**
   * Sends one live-view key event (a DOM `KeyboardEvent` seen by the viewer) to `page` (default:
   * the active tab).
   * Printable keys type their character unless Control, Alt or Meta is held.
   */
  async dispatchKey(
    e: {
      type: 'keyDown' | 'keyUp';
      key: string;
      code: string;
      keyCode: number;
      modifiers: number;
      location?: number;
      autoRepeat?: boolean;
    },
    page?: PageTarget,
  ): Promise<void> {
    const shortcut = (e.modifiers & ~MODIFIER_BITS.Shift) !== 0;
    const text = e.type === 'keyDown' && !shortcut ? textOfKey(e.key) : '';
    await sendInput(page ?? (await this.#opts.page()), 'Input.dispatchKeyEvent', {
      type: e.type === 'keyUp' ? 'keyUp' : text ? 'keyDown' : 'rawKeyDown',
      key: e.key,
      code: e.code,
      windowsVirtualKeyCode: e.keyCode,
      nativeVirtualKeyCode: e.keyCode,
      modifiers: e.modifiers,
      ...(e.location !== undefined && { location: e.location }),
      ...(e.autoRepeat !== undefined && { autoRepeat: e.autoRepeat }),
      ...(text && { text, unmodifiedText: text }),
    });
  }

  /** Inserts text into the focused element of `page` (default: the active tab), as an IME would. */
  async insertText(text: string, page?: PageTarget): Promise<void> {
    await new Keyboard(page ?? (await this.#opts.page())).insertText(text);
  }

  /** `fn` on the active tab with `hold` pressed, released whatever happens. */
  #holding(
    hold: readonly KeyDef[],
    fn: (page: PageTarget, keys: Keyboard) => Promise<void>,
  ): Promise<void> {
    return cdpFailures(async () => {
      const page = await this.#opts.page();
      const keys = new Keyboard(page);
      try {
        for (const k of hold) await keys.down(k);
        await fn(page, keys);
      } finally {
        await keys.releaseAll();
      }
    });
  }

  /** Move to `to`, clamped to the viewport, with the modifiers `keys` hold. */
  #move(page: PageTarget, to: Point, keys: Keyboard): Promise<void> {
    return this.#mouse.move(page, this.#clamp(to), keys.modifiers);
  }

  #clamp([x, y]: Point): [number, number] {
    const [w, h] = this.#opts.resolution;
    return [clamp(x, 0, w - 1), clamp(y, 0, h - 1)];
  }
}

/** `fn`, a CDP command's failure in it turned into a tool failure with the same message. */
async function cdpFailures(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    throw err instanceof CdpError ? new ToolFailure(err.message) : err;
  }
}

/** The text a DOM `key` value types: the character itself, or `\r` for Enter. */
function textOfKey(key: string): string {
  if (key === 'Enter') return '\r';
  return [...key].length === 1 ? key : '';
}

const clamp = (v: number, lo: number, hi: number) => Math.min(Math.max(Math.round(v), lo), hi);
