/**
 * Computer actions on a browser instance (COMPAT.md "computer actions"): the device that applies
 * them to the active tab through CDP `Input.*` (../computer/runner.ts runs the actions).
 * Coordinates are CSS pixels of the tab's viewport, the same coordinate system as its screenshots. The mouse position is remembered between actions (CDP
 * has no pointer of its own) so that `get_cursor_position`, clicks without coordinates and
 * scrolls land where the last action left the pointer.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MouseButton } from '../../api/index.js';
import { ToolFailure } from '../computer/failure.js';
import { keyForChar, lookupKey, MODIFIER_BITS, type KeyDef } from '../computer/keys.js';
import type { Click, ComputerDevice, Point, Scroll } from '../computer/runner.js';
import { CdpError, type CdpConnection } from './cdp.js';

/** A page to send input to: a CDP connection and the flattened session of the page target. */
export interface PageTarget {
  readonly cdp: CdpConnection;
  readonly sessionId: string;
}

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
/** Deadline of one `Input.*` command, in ms (a page stuck in a dialog or a loop blocks input). */
const INPUT_TIMEOUT_MS = 10_000;
/** Events in flight at once while typing (CDP keeps their order). */
const PIPELINE = 64;

/** DOM `buttons` bit of each button. */
const BUTTON_BIT: Readonly<Record<MouseButton, number>> = {
  left: 1,
  right: 2,
  middle: 4,
  back: 8,
  forward: 16,
};

interface Pointer {
  x: number;
  y: number;
  /** DOM `buttons` bitmask of the buttons held. */
  buttons: number;
}

/**
 * The computer device of a browser instance (computer/runner.ts runs the actions): input to the
 * active tab through CDP `Input.*`. A CDP command that fails (a tab gone, a page stuck past the
 * deadline) is a tool failure; the live-view methods below share the pointer but not that.
 */
export class CdpComputer implements ComputerDevice<KeyDef> {
  readonly #opts: CdpComputerOptions;
  readonly #pointer: Pointer;
  /** The screenshot follows the input without a pause. */
  readonly settleMs = 0;

  constructor(opts: CdpComputerOptions) {
    this.#opts = opts;
    const [w, h] = opts.resolution;
    this.#pointer = { x: Math.floor(w / 2), y: Math.floor(h / 2), buttons: 0 };
  }

  key(name: string): KeyDef | undefined {
    return lookupKey(name);
  }

  move(to: Point, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, (page, mods) => this.#move(page, to, mods));
  }

  click(c: Click, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, async (page, mods) => {
      if (c.at) await this.#move(page, c.at, mods);
      if (c.kind === 'down') return this.#button(page, 'mousePressed', c.button, 1, mods);
      if (c.kind === 'up') return this.#button(page, 'mouseReleased', c.button, 1, mods);
      for (let n = 1; n <= c.count; n++) {
        await this.#button(page, 'mousePressed', c.button, n, mods);
        await this.#button(page, 'mouseReleased', c.button, n, mods);
      }
    });
  }

  drag(path: readonly Point[], hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, async (page, mods) => {
      const [first, ...rest] = path;
      await this.#move(page, first!, mods);
      await this.#button(page, 'mousePressed', 'left', 1, mods);
      try {
        for (const p of rest) await this.#move(page, p, mods);
      } finally {
        await this.#button(page, 'mouseReleased', 'left', 1, mods);
      }
    });
  }

  scroll(s: Scroll, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, async (page, mods) => {
      if (s.at) await this.#move(page, s.at, mods);
      const deltaX = Math.round(s.deltaX) * PIXELS_PER_NOTCH;
      const deltaY = Math.round(s.deltaY) * PIXELS_PER_NOTCH;
      if (deltaX === 0 && deltaY === 0) return;
      await this.#send(page, 'Input.dispatchMouseEvent', {
        type: 'mouseWheel',
        x: this.#pointer.x,
        y: this.#pointer.y,
        deltaX,
        deltaY,
        modifiers: mods(),
        pointerType: 'mouse',
      });
    });
  }

  press(keys: readonly KeyDef[], holdMs: number): Promise<void> {
    return cdpFailures(async () => {
      const held = new Keys(await this.#opts.page());
      try {
        for (const k of keys) await held.down(k);
        if (holdMs) await sleep(holdMs);
      } finally {
        await held.releaseAll();
      }
    });
  }

  type(text: string, hold: readonly KeyDef[]): Promise<void> {
    return this.#holding(hold, (_page, _mods, held) => held.type(text));
  }

  cursor(): Promise<Point> {
    return Promise.resolve([this.#pointer.x, this.#pointer.y]);
  }

  screenshot(): Promise<Buffer> {
    return this.#opts.screenshot();
  }

  /**
   * Sends one live-view input event to `page` (default: the active tab), keeping the remembered
   * pointer in step with what the viewer does.
   */
  async dispatchMouse(
    params: {
      type: 'mousePressed' | 'mouseReleased' | 'mouseMoved' | 'mouseWheel';
      x: number;
      y: number;
      button?: MouseButton | 'none' | undefined;
      buttons?: number | undefined;
      clickCount?: number | undefined;
      modifiers?: number | undefined;
      deltaX?: number | undefined;
      deltaY?: number | undefined;
    },
    page?: PageTarget,
  ): Promise<void> {
    const [x, y] = this.#clamp([params.x, params.y]);
    this.#pointer.x = x;
    this.#pointer.y = y;
    if (params.buttons !== undefined) this.#pointer.buttons = params.buttons;
    await this.#send(page ?? (await this.#opts.page()), 'Input.dispatchMouseEvent', {
      pointerType: 'mouse',
      ...params,
      x,
      y,
    });
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
    await this.#send(page ?? (await this.#opts.page()), 'Input.dispatchKeyEvent', {
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
    await this.#send(page ?? (await this.#opts.page()), 'Input.insertText', { text });
  }

  /** `fn` on the active tab with `hold` pressed, released whatever happens. */
  #holding(
    hold: readonly KeyDef[],
    fn: (page: PageTarget, modifiers: () => number, held: Keys) => Promise<void>,
  ): Promise<void> {
    return cdpFailures(async () => {
      const page = await this.#opts.page();
      const held = new Keys(page);
      try {
        for (const k of hold) await held.down(k);
        await fn(page, () => held.modifiers, held);
      } finally {
        await held.releaseAll();
      }
    });
  }

  async #move(page: PageTarget, to: readonly [number, number], mods: () => number): Promise<void> {
    const [x, y] = this.#clamp(to);
    this.#pointer.x = x;
    this.#pointer.y = y;
    await this.#send(page, 'Input.dispatchMouseEvent', {
      type: 'mouseMoved',
      x,
      y,
      button: pressedButton(this.#pointer.buttons),
      buttons: this.#pointer.buttons,
      modifiers: mods(),
      pointerType: 'mouse',
    });
  }

  async #button(
    page: PageTarget,
    type: 'mousePressed' | 'mouseReleased',
    button: MouseButton,
    clickCount: number,
    mods: () => number,
  ): Promise<void> {
    if (type === 'mousePressed') this.#pointer.buttons |= BUTTON_BIT[button];
    else this.#pointer.buttons &= ~BUTTON_BIT[button];
    await this.#send(page, 'Input.dispatchMouseEvent', {
      type,
      x: this.#pointer.x,
      y: this.#pointer.y,
      button,
      buttons: this.#pointer.buttons,
      clickCount,
      modifiers: mods(),
      pointerType: 'mouse',
    });
  }

  #clamp([x, y]: readonly [number, number]): [number, number] {
    const [w, h] = this.#opts.resolution;
    return [clamp(x, 0, w - 1), clamp(y, 0, h - 1)];
  }

  #send(page: PageTarget, method: string, params: Record<string, unknown>): Promise<unknown> {
    return send(page, method, params);
  }
}

/** One `Input.*` command on the page's session, with a deadline. */
function send(page: PageTarget, method: string, params: Record<string, unknown>): Promise<unknown> {
  return page.cdp.send(method, params, page.sessionId, INPUT_TIMEOUT_MS);
}

/** Keys held down on one page during one action, and the modifier mask they make. */
class Keys {
  readonly #page: PageTarget;
  readonly #held: KeyDef[] = [];
  #modifiers = 0;

  constructor(page: PageTarget) {
    this.#page = page;
  }

  get modifiers(): number {
    return this.#modifiers;
  }

  async down(def: KeyDef, autoRepeat = false): Promise<void> {
    if (def.modifier) this.#modifiers |= MODIFIER_BITS[def.modifier];
    this.#held.push(def);
    await send(this.#page, 'Input.dispatchKeyEvent', this.#event('down', def, autoRepeat));
  }

  async up(def: KeyDef): Promise<void> {
    const i = this.#held.lastIndexOf(def);
    if (i >= 0) this.#held.splice(i, 1);
    if (def.modifier && !this.#held.some((k) => k.modifier === def.modifier)) {
      this.#modifiers &= ~MODIFIER_BITS[def.modifier];
    }
    await send(this.#page, 'Input.dispatchKeyEvent', this.#event('up', def, false));
  }

  /** Release every held key, last pressed first; keeps going past a failure. */
  async releaseAll(): Promise<void> {
    let first: unknown;
    while (this.#held.length > 0) {
      await this.up(this.#held[this.#held.length - 1]!).catch((err: unknown) => (first ??= err));
    }
    if (first !== undefined) throw first;
  }

  /**
   * Types text as key presses where the US layout has a key for the character (so pages see
   * keydown/keypress/keyup), and inserts the rest (emoji, accents …) with `Input.insertText`.
   */
  async type(text: string): Promise<void> {
    let inFlight: Promise<unknown>[] = [];
    const push = async (p: Promise<unknown>) => {
      inFlight.push(p);
      if (inFlight.length >= PIPELINE) await flush();
    };
    const flush = async () => {
      const batch = inFlight;
      inFlight = [];
      await Promise.all(batch);
    };
    let pending = '';
    for (const ch of text) {
      const def = keyForChar(ch);
      if (!def) {
        pending += ch;
        continue;
      }
      if (pending) {
        await push(send(this.#page, 'Input.insertText', { text: pending }));
        pending = '';
      }
      await push(send(this.#page, 'Input.dispatchKeyEvent', this.#event('down', def, false)));
      await push(send(this.#page, 'Input.dispatchKeyEvent', this.#event('up', def, false)));
    }
    if (pending) await push(send(this.#page, 'Input.insertText', { text: pending }));
    await flush();
  }

  /** The `Input.dispatchKeyEvent` parameters of a key going down or up, as Playwright sends them. */
  #event(dir: 'down' | 'up', def: KeyDef, autoRepeat: boolean): Record<string, unknown> {
    const shift = (this.#modifiers & MODIFIER_BITS.Shift) !== 0;
    const key = shift && def.shifted ? def.shifted.key : def.key;
    let text = shift && def.shifted ? def.shifted.key : (def.text ?? '');
    // with a modifier other than Shift held, a key is a shortcut and types nothing
    if ((this.#modifiers & ~MODIFIER_BITS.Shift) !== 0) text = '';
    const base = {
      modifiers: this.#modifiers,
      key,
      code: def.code,
      windowsVirtualKeyCode: def.keyCode,
      nativeVirtualKeyCode: def.keyCode,
      ...(def.location !== undefined && { location: def.location }),
    };
    if (dir === 'up') return { type: 'keyUp', ...base };
    return {
      type: text ? 'keyDown' : 'rawKeyDown',
      ...base,
      text,
      unmodifiedText: text,
      autoRepeat,
    };
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

/** The `button` CDP wants on a move: the first held one, or none. */
function pressedButton(buttons: number): MouseButton | 'none' {
  for (const [name, bit] of Object.entries(BUTTON_BIT) as [MouseButton, number][]) {
    if (buttons & bit) return name;
  }
  return 'none';
}

/** The text a DOM `key` value types: the character itself, or `\r` for Enter. */
function textOfKey(key: string): string {
  if (key === 'Enter') return '\r';
  return [...key].length === 1 ? key : '';
}

const clamp = (v: number, lo: number, hi: number) => Math.min(Math.max(Math.round(v), lo), hi);
