/**
 * Computer actions on an ubuntu instance's X display (COMPAT.md "computer actions"), one at a
 * time per instance.
 *
 * Input goes through xdotool (xdotool.ts; the arguments come from actions.ts). Screenshots do
 * not spawn anything: a small X11 client (x11.ts) asks the server for the root window's pixels
 * and encodes them to PNG in process. Characters the keymap lacks are bound to spare keycodes
 * over the same connection before xdotool types them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ParsedComputerAction, ToolResult } from '../../../api/index.js';
import { SerialQueue } from '../../../internal/serial.js';
import {
  cursorPosition,
  keysymOf,
  keysyms,
  pointerCommand,
  typeCommand,
  typingRuns,
} from './actions.js';
import { ActionError } from './errors.js';
import { X11Screen, type X11Target } from './x11.js';
import { Xdotool, XDOTOOL_TIMEOUT_MS, type SandboxExec } from './xdotool.js';

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

/** Actions after which the screen may have changed. */
const changesScreen = (a: ParsedComputerAction) =>
  a.action !== 'take_screenshot' && a.action !== 'get_cursor_position' && a.action !== 'wait';

export class XComputer {
  readonly #resolution: readonly [number, number];
  readonly #settleMs: number;
  readonly #x11: X11Screen;
  readonly #xdotool: Xdotool;
  readonly #queue = new SerialQueue();

  constructor(opts: XComputerOptions) {
    this.#resolution = opts.resolution;
    this.#settleMs = opts.settleMs ?? 100;
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

  /** Runs one action; tool failures come back in `error`, with a screenshot when one was asked for. */
  run(action: ParsedComputerAction): Promise<ToolResult> {
    return this.#queue.run(async () => {
      const result: ToolResult = {};
      let settle = false;
      try {
        const out = await this.#act(action);
        if (out !== undefined) result.output = out;
        settle = changesScreen(action);
      } catch (err) {
        if (!(err instanceof ActionError)) throw err;
        result.error = err.message;
      }
      if (action.screenshot ?? true) {
        if (settle && this.#settleMs > 0) await sleep(this.#settleMs);
        result.base64_image = (await this.screenshot()).toString('base64');
      }
      return result;
    });
  }

  /** Closes the X connection. The display itself belongs to the runtime. */
  close(): void {
    this.#x11.close();
  }

  async #act(a: ParsedComputerAction): Promise<string | undefined> {
    switch (a.action) {
      case 'move_mouse':
      case 'click_mouse':
      case 'drag_mouse':
      case 'scroll': {
        const command = pointerCommand(a, this.#resolution);
        if (command) await this.#withHeld(a.hold_keys, command.args, command.timeoutMs);
        return;
      }
      case 'press_key': {
        const chord = keysyms(a.keys).join('+');
        if (!a.duration) {
          await this.#xdotool.run(['key', '--delay', '0', chord]);
          return;
        }
        await this.#xdotool.run(['keydown', '--delay', '0', chord]);
        try {
          await sleep(a.duration * 1000);
        } finally {
          await this.#xdotool.run(['keyup', '--delay', '0', chord]);
        }
        return;
      }
      case 'type_text': {
        if (a.text === '') return;
        await this.#holding(a.hold_keys, async () => {
          for (const run of typingRuns(a.text)) {
            // bind what the keymap lacks first, and give applications time to see the new
            // keymap: xdotool's own on-the-fly binding races them and loses characters
            if (run.remapped && (await this.#x11.ensureKeysyms([...run.text].map(keysymOf)))) {
              await sleep(KEYMAP_SETTLE_MS);
            }
            const { args, timeoutMs } = typeCommand(run);
            await this.#xdotool.run(args, timeoutMs, run.text);
          }
        });
        return;
      }
      case 'wait':
        await sleep(a.duration * 1000);
        return;
      case 'take_screenshot':
        return;
      case 'get_cursor_position':
        return cursorPosition(await this.#xdotool.run(['getmouselocation', '--shell']));
    }
  }

  /** One xdotool call with `hold_keys` pressed around it, released even if it fails. */
  #withHeld(hold: readonly string[] | undefined, args: string[], timeoutMs = XDOTOOL_TIMEOUT_MS) {
    if (!hold?.length) return this.#xdotool.run(args, timeoutMs);
    const held = keysyms(hold).join('+');
    const down = ['keydown', '--delay', '0', held];
    const up = ['keyup', '--delay', '0', held];
    return this.#xdotool.run([...down, ...args, ...up], timeoutMs).catch(async (err: unknown) => {
      await this.#xdotool.run(up).catch(() => undefined);
      throw err;
    });
  }

  /** `fn` with `hold_keys` pressed (separate xdotool calls), released even if it fails. */
  async #holding<T>(hold: readonly string[] | undefined, fn: () => Promise<T>): Promise<T> {
    if (!hold?.length) return fn();
    const held = keysyms(hold).join('+');
    await this.#xdotool.run(['keydown', '--delay', '0', held]);
    try {
      return await fn();
    } finally {
      await this.#xdotool.run(['keyup', '--delay', '0', held]);
    }
  }
}
