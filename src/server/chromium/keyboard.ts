/**
 * Keys and text into a page over CDP `Input.*`, the one way the server types into a tab: the
 * computer actions of a browser instance (input.ts) and the MCP browser tools (../mcp/page/)
 * press the keys of one table (../computer/keys.ts) through this module. Events are the ones
 * Playwright sends for the same keys (US layout): a key held with Shift gives its shifted
 * character, a key held with Control, Alt or Meta is a shortcut and types nothing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { keyForChar, MODIFIER_BITS, type KeyDef } from '../computer/keys.js';
import type { CdpConnection, CdpParams } from './cdp.js';

/** A page to send input to: a CDP connection and the flattened session of the page target. */
export interface PageTarget {
  readonly cdp: CdpConnection;
  readonly sessionId: string;
}

/** Deadline of one `Input.*` command, in ms (a page stuck in a dialog or a loop blocks input). */
const INPUT_TIMEOUT_MS = 10_000;
/** Events in flight at once while typing (CDP keeps their order). */
const PIPELINE = 64;

/** One `Input.*` command on the page's session, with a deadline. */
export function sendInput(page: PageTarget, method: string, params: CdpParams): Promise<unknown> {
  return page.cdp.send(method, params, page.sessionId, INPUT_TIMEOUT_MS);
}

/** Keys held down on one page during one action, and the modifier mask they make. */
export class Keyboard {
  readonly #page: PageTarget;
  readonly #held: KeyDef[] = [];
  #modifiers = 0;

  constructor(page: PageTarget) {
    this.#page = page;
  }

  /** CDP modifier bits of the modifier keys held. */
  get modifiers(): number {
    return this.#modifiers;
  }

  async down(def: KeyDef, autoRepeat = false): Promise<void> {
    if (def.modifier) this.#modifiers |= MODIFIER_BITS[def.modifier];
    this.#held.push(def);
    await sendInput(this.#page, 'Input.dispatchKeyEvent', this.#event('down', def, autoRepeat));
  }

  async up(def: KeyDef): Promise<void> {
    const i = this.#held.lastIndexOf(def);
    if (i >= 0) this.#held.splice(i, 1);
    if (def.modifier && !this.#held.some((k) => k.modifier === def.modifier)) {
      this.#modifiers &= ~MODIFIER_BITS[def.modifier];
    }
    await sendInput(this.#page, 'Input.dispatchKeyEvent', this.#event('up', def, false));
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
   * `keys` pressed together in order (a chord: `Control` then `a`), held `holdMs`, then released
   * last first, whatever happens.
   */
  async press(keys: readonly KeyDef[], holdMs = 0): Promise<void> {
    try {
      for (const k of keys) await this.down(k);
      if (holdMs) await sleep(holdMs);
    } finally {
      await this.releaseAll();
    }
  }

  /** Inserts text into the focused element, as an IME would: no key events. */
  async insertText(text: string): Promise<void> {
    await sendInput(this.#page, 'Input.insertText', { text });
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
        await push(sendInput(this.#page, 'Input.insertText', { text: pending }));
        pending = '';
      }
      await push(sendInput(this.#page, 'Input.dispatchKeyEvent', this.#event('down', def, false)));
      await push(sendInput(this.#page, 'Input.dispatchKeyEvent', this.#event('up', def, false)));
    }
    if (pending) await push(sendInput(this.#page, 'Input.insertText', { text: pending }));
    await flush();
  }

  /** The `Input.dispatchKeyEvent` parameters of a key going down or up, as Playwright sends them. */
  #event(dir: 'down' | 'up', def: KeyDef, autoRepeat: boolean): CdpParams {
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
