/**
 * Computer actions as xdotool sees them (COMPAT.md "computer actions"): pure translations of
 * the API's actions into xdotool arguments, key names into X keysyms, and text into runs that
 * can be typed. Running them is computer.ts's job.
 */
import { keyForChar, lookupKey, xKeysym } from '../../computer/keys.js';
import type { Click, Point, Scroll } from '../../computer/runner.js';
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

/** `v` rounded and kept within `[lo, hi]`. */
export const clamp = (v: number, lo: number, hi: number): number =>
  Math.min(Math.max(Math.round(v), lo), hi);

/** `[x, y]` rounded and clamped to a screen of `[width, height]`, as xdotool arguments. */
export function xyArgs([x, y]: Point, [w, h]: Point): [string, string] {
  return [String(clamp(x, 0, w - 1)), String(clamp(y, 0, h - 1))];
}

/** Moving the pointer to `to`. */
export function moveCommand(to: Point, resolution: Point): XdotoolCommand {
  return { args: ['mousemove', ...xyArgs(to, resolution)], timeoutMs: XDOTOOL_TIMEOUT_MS };
}

/** A click (moving there first when it has a point). */
export function clickCommand(c: Click, resolution: Point): XdotoolCommand {
  const button = String(XBUTTON[c.button]);
  const args = c.at ? ['mousemove', ...xyArgs(c.at, resolution)] : [];
  if (c.kind === 'down') args.push('mousedown', button);
  else if (c.kind === 'up') args.push('mouseup', button);
  else {
    // xdotool sleeps `--delay` after every click, the last one included
    args.push('click', '--repeat', String(c.count), '--delay', c.count > 1 ? '50' : '0', button);
  }
  return { args, timeoutMs: XDOTOOL_TIMEOUT_MS };
}

/** A drag with the left button along `path`, the deadline growing with its length. */
export function dragCommand(path: readonly Point[], resolution: Point): XdotoolCommand {
  const xy = (p: Point) => xyArgs(p, resolution);
  const [first, ...rest] = path;
  const args = ['mousemove', ...xy(first!), 'mousedown', '1', 'sleep', '0.05'];
  for (const p of rest) args.push('mousemove', ...xy(p), 'sleep', '0.01');
  args.push('sleep', '0.05', 'mouseup', '1');
  return { args, timeoutMs: XDOTOOL_TIMEOUT_MS + rest.length * 50 };
}

/**
 * A scroll in wheel clicks, one per notch; `undefined` when there is nothing to do (less than
 * half a notch, nowhere to move).
 */
export function scrollCommand(s: Scroll, resolution: Point): XdotoolCommand | undefined {
  const args = s.at ? ['mousemove', ...xyArgs(s.at, resolution)] : [];
  // buttons 4/5 scroll up/down, 6/7 left/right
  const notches = (delta: number, neg: number, pos: number) => {
    const n = Math.round(Math.abs(delta));
    if (n > 0) {
      const button = String(delta < 0 ? neg : pos);
      args.push('click', '--repeat', String(n), '--delay', '10', button);
    }
    return n;
  };
  const total = notches(s.deltaY, 4, 5) + notches(s.deltaX, 6, 7);
  return args.length > 0 ? { args, timeoutMs: XDOTOOL_TIMEOUT_MS + total * 30 } : undefined;
}

/**
 * The X keysym of one key name: the table's, or the name itself when it looks like a keysym
 * (xdotool knows every keysym X does, e.g. `XF86AudioMute`); `undefined` for anything else.
 */
export function xKey(name: string): string | undefined {
  if (lookupKey(name) === undefined && !/^[A-Za-z0-9_]+$/.test(name)) return undefined;
  return xKeysym(name);
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

/** The pointer's position in `getmouselocation --shell` output. */
export function cursorPosition(out: string): Point {
  const x = /^X=(-?\d+)$/m.exec(out)?.[1];
  const y = /^Y=(-?\d+)$/m.exec(out)?.[1];
  if (x === undefined || y === undefined) throw new Error(`unexpected xdotool output: ${out}`);
  return [Number(x), Number(y)];
}
