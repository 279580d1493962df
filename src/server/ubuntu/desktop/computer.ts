/**
 * Computer actions on an ubuntu instance's X display (COMPAT.md "computer actions"): the device
 * that applies them (../../computer/runner.ts runs the actions, one at a time per instance).
 *
 * Input goes through xdotool (xdotool.ts; the arguments come from actions.ts). Screenshots do
 * not spawn anything: a small X11 client (x11.ts) asks the server for the root window's pixels
 * and encodes them to PNG in process. Characters the keymap lacks are bound to spare keycodes
 * over the same connection before xdotool types them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Click, ComputerDevice, Point, Scroll } from '../../computer/runner.js';
import {
  clickCommand,
  cursorPosition,
  dragCommand,
  keysymOf,
  moveCommand,
  scrollCommand,
  typeCommand,
  typingRuns,
  xKey,
  type XdotoolCommand,
} from './actions.js';
import { X11Screen, type X11Target } from './x11.js';
import { Xdotool, type SandboxExec } from './xdotool.js';

export interface XComputerOptions extends X11Target {
  /** Screen size `[width, height]` in pixels; coordinates are clamped to it. */
  resolution: readonly [number, number];
  /** xdotool binary. Default `/usr/bin/xdotool`. */
  xdotool?: string;
  /**
   * Where xdotool runs: inside the instance (its sandbox's `exec`, with `DISPLAY`/`XAUTHORITY` as
   * the instance sees them). Default: a child of the server using `display`/`xauthority`.
   */
  xdotoolIn?: { exec: SandboxExec; display: string; xauthority?: string | undefined };
  /**
   * Pause after an action that changes the screen, before its screenshot, so that applications
   * have repainted. In ms; default 100.
   */
  settleMs?: number;
}

/** Time applications get to read a changed keymap before keys of it are typed, in ms. */
const KEYMAP_SETTLE_MS = 150;

/** The keys of an X display are keysym names (xdotool's words for them). */
export class XComputer implements ComputerDevice<string> {
  readonly #resolution: readonly [number, number];
  readonly settleMs: number;
  readonly #x11: X11Screen;
  readonly #xdotool: Xdotool;

  constructor(opts: XComputerOptions) {
    this.#resolution = opts.resolution;
    this.settleMs = opts.settleMs ?? 100;
    this.#x11 = new X11Screen(opts);
    this.#xdotool = new Xdotool({
      bin: opts.xdotool ?? '/usr/bin/xdotool',
      display: opts.xdotoolIn?.display ?? opts.display,
      xauthority: opts.xdotoolIn ? opts.xdotoolIn.xauthority : opts.xauthority,
      exec: opts.xdotoolIn?.exec,
    });
  }

  /** PNG of the whole root window. */
  screenshot(): Promise<Buffer> {
    return this.#x11.screenshot();
  }

  /** Closes the X connection. The display itself belongs to the runtime. */
  close(): void {
    this.#x11.close();
  }

  key(name: string): string | undefined {
    return xKey(name);
  }

  async move(to: Point, hold: readonly string[]): Promise<void> {
    await this.#withHeld(hold, moveCommand(to, this.#resolution));
  }

  async click(c: Click, hold: readonly string[]): Promise<void> {
    await this.#withHeld(hold, clickCommand(c, this.#resolution));
  }

  async drag(path: readonly Point[], hold: readonly string[]): Promise<void> {
    await this.#withHeld(hold, dragCommand(path, this.#resolution));
  }

  async scroll(s: Scroll, hold: readonly string[]): Promise<void> {
    const command = scrollCommand(s, this.#resolution);
    if (command) await this.#withHeld(hold, command);
  }

  async press(keys: readonly string[], holdMs: number): Promise<void> {
    const chord = keys.join('+');
    if (!holdMs) {
      await this.#xdotool.run(['key', '--delay', '0', chord]);
      return;
    }
    await this.#xdotool.run(['keydown', '--delay', '0', chord]);
    try {
      await sleep(holdMs);
    } finally {
      await this.#xdotool.run(['keyup', '--delay', '0', chord]);
    }
  }

  async type(text: string, hold: readonly string[]): Promise<void> {
    if (text === '') return;
    await this.#holding(hold, async () => {
      for (const run of typingRuns(text)) {
        // bind what the keymap lacks first, and give applications time to see the new
        // keymap: xdotool's own on-the-fly binding races them and loses characters
        if (run.remapped && (await this.#x11.ensureKeysyms([...run.text].map(keysymOf)))) {
          await sleep(KEYMAP_SETTLE_MS);
        }
        const { args, timeoutMs } = typeCommand(run);
        await this.#xdotool.run(args, timeoutMs, run.text);
      }
    });
  }

  async cursor(): Promise<Point> {
    return cursorPosition(await this.#xdotool.run(['getmouselocation', '--shell']));
  }

  /** One xdotool call with `hold` pressed around it, released even if it fails. */
  async #withHeld(hold: readonly string[], { args, timeoutMs }: XdotoolCommand): Promise<void> {
    if (!hold.length) {
      await this.#xdotool.run(args, timeoutMs);
      return;
    }
    const held = hold.join('+');
    const down = ['keydown', '--delay', '0', held];
    const up = ['keyup', '--delay', '0', held];
    await this.#xdotool.run([...down, ...args, ...up], timeoutMs).catch(async (err: unknown) => {
      await this.#xdotool.run(up).catch(() => undefined);
      throw err;
    });
  }

  /** `fn` with `hold` pressed (separate xdotool calls), released even if it fails. */
  async #holding(hold: readonly string[], fn: () => Promise<void>): Promise<void> {
    if (!hold.length) return fn();
    const held = hold.join('+');
    await this.#xdotool.run(['keydown', '--delay', '0', held]);
    try {
      await fn();
    } finally {
      await this.#xdotool.run(['keyup', '--delay', '0', held]);
    }
  }
}
