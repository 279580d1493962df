/**
 * Computer actions as xdotool sees them (COMPAT.md "computer actions"): pure translations of
 * the API's actions into xdotool arguments, key names into X keysyms, and text into runs that
 * can be typed. Running them is computer.ts's job.
 */
import type { ParsedComputerAction } from '../../../api/index.js';
import { expandKeys, keyForChar, lookupKey, xKeysym } from '../../computer/keys.js';
import { ActionError } from './errors.js';
import { XDOTOOL_TIMEOUT_MS } from './xdotool.js';

/** The xdotool button number of each API button. */
export const XBUTTON = { left: 1, middle: 2, right: 3, back: 8, forward: 9 } as const;
/** Inter-key delay of `xdotool type`, in ms (0 makes some applications drop keys). */
export const TYPE_DELAY_MS = 6;

/** One xdotool call: its arguments and deadline. */
export interface XdotoolCommand {
  args: string[];
  timeoutMs: number;
}

export type PointerAction = Extract<
  ParsedComputerAction,
  { action: 'move_mouse' | 'click_mouse' | 'drag_mouse' | 'scroll' }
>;

/** `v` rounded and kept within `[lo, hi]`. */
export const clamp = (v: number, lo: number, hi: number): number =>
  Math.min(Math.max(Math.round(v), lo), hi);

/** `[x, y]` rounded and clamped to a screen of `[width, height]`, as xdotool arguments. */
export function xyArgs(
  [x, y]: readonly [number, number],
  [w, h]: readonly [number, number],
): [string, string] {
  return [String(clamp(x, 0, w - 1)), String(clamp(y, 0, h - 1))];
}

/**
 * The xdotool call of a pointer action on a screen of `resolution`, without its `hold_keys`;
 * `undefined` when there is nothing to do (a scroll of less than half a notch, nowhere).
 */
export function pointerCommand(
  a: PointerAction,
  resolution: readonly [number, number],
): XdotoolCommand | undefined {
  const xy = (p: readonly [number, number]) => xyArgs(p, resolution);
  switch (a.action) {
    case 'move_mouse':
      return { args: ['mousemove', ...xy(a.coordinates)], timeoutMs: XDOTOOL_TIMEOUT_MS };
    case 'click_mouse': {
      const button = String(XBUTTON[a.button]);
      const args = a.coordinates ? ['mousemove', ...xy(a.coordinates)] : [];
      const type = a.click_type ?? 'click';
      if (type === 'down') args.push('mousedown', button);
      else if (type === 'up') args.push('mouseup', button);
      else {
        const n = a.num_clicks ?? 1;
        // xdotool sleeps `--delay` after every click, the last one included
        args.push('click', '--repeat', String(n), '--delay', n > 1 ? '50' : '0', button);
      }
      return { args, timeoutMs: XDOTOOL_TIMEOUT_MS };
    }
    case 'drag_mouse': {
      const [first, ...rest] = a.path;
      const args = ['mousemove', ...xy(first!), 'mousedown', '1', 'sleep', '0.05'];
      for (const p of rest) args.push('mousemove', ...xy(p), 'sleep', '0.01');
      args.push('sleep', '0.05', 'mouseup', '1');
      return { args, timeoutMs: XDOTOOL_TIMEOUT_MS + rest.length * 50 };
    }
    case 'scroll': {
      const args = a.coordinates ? ['mousemove', ...xy(a.coordinates)] : [];
      // buttons 4/5 scroll up/down, 6/7 left/right; one click per notch
      const notches = (delta: number, neg: number, pos: number) => {
        const n = Math.round(Math.abs(delta));
        if (n > 0) {
          const button = String(delta < 0 ? neg : pos);
          args.push('click', '--repeat', String(n), '--delay', '10', button);
        }
        return n;
      };
      const total = notches(a.delta_y ?? 0, 4, 5) + notches(a.delta_x ?? 0, 6, 7);
      return args.length > 0 ? { args, timeoutMs: XDOTOOL_TIMEOUT_MS + total * 30 } : undefined;
    }
  }
}

/** X keysym names of key entries (chords like `ctrl+c` expanded); unknown names throw. */
export function keysyms(entries: readonly string[]): string[] {
  return expandKeys(entries).map((k) => {
    if (lookupKey(k) === undefined && !/^[A-Za-z0-9_]+$/.test(k)) {
      throw new ActionError(`Unknown key name '${k}'`);
    }
    return xKeysym(k);
  });
}

/** The X keysym of a character: Latin-1 keysyms equal the code point, others are 0x1000000 + it. */
export function keysymOf(ch: string): number {
  const cp = ch.codePointAt(0)!;
  return (cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff) ? cp : 0x01000000 + cp;
}

/** A stretch of text typed with one xdotool call. */
export interface TypingRun {
  text: string;
  /** Whether the US keymap lacks its characters, which must be bound to keycodes first. */
  remapped: boolean;
}

/** `text` cut into runs the US keymap can type and runs whose keys must be bound first. */
export function typingRuns(text: string): TypingRun[] {
  const runs: TypingRun[] = [];
  for (const ch of text) {
    const remapped = keyForChar(ch) === undefined;
    const last = runs.at(-1);
    if (last && last.remapped === remapped) last.text += ch;
    else runs.push({ text: ch, remapped });
  }
  return runs;
}

/** The `xdotool type` call of one run (the text goes to its stdin). */
export function typeCommand(run: TypingRun): XdotoolCommand {
  return {
    args: ['type', '--delay', String(TYPE_DELAY_MS), '--file', '-'],
    timeoutMs: XDOTOOL_TIMEOUT_MS + [...run.text].length * TYPE_DELAY_MS * 4,
  };
}

/** `getmouselocation --shell` output → the API's `X=<x>,Y=<y>`. */
export function cursorPosition(out: string): string {
  const x = /^X=(-?\d+)$/m.exec(out)?.[1];
  const y = /^Y=(-?\d+)$/m.exec(out)?.[1];
  if (x === undefined || y === undefined) throw new Error(`unexpected xdotool output: ${out}`);
  return `X=${x},Y=${y}`;
}
