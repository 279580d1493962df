/**
 * The key names `computer` actions accept (COMPAT.md "computer actions"): X keysyms plus the
 * aliases `alt ctrl control meta super shift enter return` and common browser names
 * (`arrowdown`, `backspace`, `esc`, `pageup` …), matched case-insensitively. One table serves
 * both instance types and the MCP browser tools (whose Playwright names, `Enter`, `ArrowLeft`,
 * `Control`, are names of this table too): ubuntu instances need the X keysym for xdotool,
 * browsers need the DOM `key`/`code`/`keyCode` triple for CDP `Input.dispatchKeyEvent` (US
 * layout, ../chromium/keyboard.ts).
 */

export type Modifier = 'Alt' | 'Control' | 'Meta' | 'Shift';

/** CDP `Input.dispatchKeyEvent` modifier bits. */
export const MODIFIER_BITS: Readonly<Record<Modifier, number>> = {
  Alt: 1,
  Control: 2,
  Meta: 4,
  Shift: 8,
};

/** One physical key, as X and as the DOM see it. */
export interface KeyDef {
  /** X keysym name for xdotool, e.g. `Return`, `Control_L`, `a`, `U00E9`. */
  readonly keysym: string;
  /** DOM `KeyboardEvent.key`, e.g. `Enter`, `Control`, `a`. */
  readonly key: string;
  /** DOM `KeyboardEvent.code`, e.g. `Enter`, `ControlLeft`, `KeyA`; empty when none. */
  readonly code: string;
  /** Windows virtual key code (`keyCode`); 0 when none. */
  readonly keyCode: number;
  /** Text the key inserts, if any (`\r` for Enter). */
  readonly text?: string;
  /** DOM key location: 1 left, 2 right, 3 numpad. */
  readonly location?: number;
  /** Set for modifier keys. */
  readonly modifier?: Modifier;
  /** What the key produces with Shift held (US layout). */
  readonly shifted?: { readonly key: string; readonly keysym: string };
}

const table = new Map<string, KeyDef>();
/** Printable characters of the US layout → the key that types them (shifted or not). */
const byChar = new Map<string, KeyDef>();

function add(names: readonly string[], def: KeyDef): void {
  for (const n of names) table.set(n.toLowerCase(), def);
}

function mod(modifier: Modifier, side: 'Left' | 'Right', keysym: string, keyCode: number): KeyDef {
  return {
    keysym,
    key: modifier,
    code: `${modifier}${side}`,
    keyCode,
    location: side === 'Left' ? 1 : 2,
    modifier,
  };
}

add(
  ['ctrl', 'control', 'control_l', 'controlleft', 'lctrl'],
  mod('Control', 'Left', 'Control_L', 17),
);
add(['control_r', 'controlright', 'rctrl'], mod('Control', 'Right', 'Control_R', 17));
add(['shift', 'shift_l', 'shiftleft', 'lshift'], mod('Shift', 'Left', 'Shift_L', 16));
add(['shift_r', 'shiftright', 'rshift'], mod('Shift', 'Right', 'Shift_R', 16));
add(['alt', 'alt_l', 'altleft', 'option', 'lalt'], mod('Alt', 'Left', 'Alt_L', 18));
add(['alt_r', 'altright', 'ralt', 'altgr'], mod('Alt', 'Right', 'Alt_R', 18));
// X has no usable Meta key on a stock keymap (Meta_L shares Alt's modifier); browsers on Linux
// report the Super key as `Meta`, so meta, super, cmd and win all mean Super_L.
add(
  ['meta', 'meta_l', 'metaleft', 'super', 'super_l', 'cmd', 'command', 'win', 'windows', 'os'],
  mod('Meta', 'Left', 'Super_L', 91),
);
add(['meta_r', 'metaright', 'super_r'], mod('Meta', 'Right', 'Super_R', 92));

const named: [
  names: string[],
  keysym: string,
  key: string,
  code: string,
  keyCode: number,
  text?: string,
][] = [
  [['enter', 'return', 'kp_enter'], 'Return', 'Enter', 'Enter', 13, '\r'],
  [['tab'], 'Tab', 'Tab', 'Tab', 9],
  [['backspace', 'back_space', 'bksp'], 'BackSpace', 'Backspace', 'Backspace', 8],
  [['esc', 'escape'], 'Escape', 'Escape', 'Escape', 27],
  [['delete', 'del'], 'Delete', 'Delete', 'Delete', 46],
  [['insert', 'ins'], 'Insert', 'Insert', 'Insert', 45],
  [['home'], 'Home', 'Home', 'Home', 36],
  [['end'], 'End', 'End', 'End', 35],
  [['pageup', 'page_up', 'pgup', 'prior'], 'Prior', 'PageUp', 'PageUp', 33],
  [['pagedown', 'page_down', 'pgdn', 'next'], 'Next', 'PageDown', 'PageDown', 34],
  [['arrowup', 'up'], 'Up', 'ArrowUp', 'ArrowUp', 38],
  [['arrowdown', 'down'], 'Down', 'ArrowDown', 'ArrowDown', 40],
  [['arrowleft', 'left'], 'Left', 'ArrowLeft', 'ArrowLeft', 37],
  [['arrowright', 'right'], 'Right', 'ArrowRight', 'ArrowRight', 39],
  [['capslock', 'caps_lock'], 'Caps_Lock', 'CapsLock', 'CapsLock', 20],
  [['numlock', 'num_lock'], 'Num_Lock', 'NumLock', 'NumLock', 144],
  [['scrolllock', 'scroll_lock'], 'Scroll_Lock', 'ScrollLock', 'ScrollLock', 145],
  [['pause', 'break'], 'Pause', 'Pause', 'Pause', 19],
  [['printscreen', 'print', 'prtsc'], 'Print', 'PrintScreen', 'PrintScreen', 44],
  [['contextmenu', 'menu', 'apps'], 'Menu', 'ContextMenu', 'ContextMenu', 93],
];
for (const [names, keysym, key, code, keyCode, text] of named) {
  add(names, { keysym, key, code, keyCode, ...(text !== undefined && { text }) });
}
for (let i = 1; i <= 24; i++) {
  add([`f${i}`], { keysym: `F${i}`, key: `F${i}`, code: `F${i}`, keyCode: 111 + i });
}

/** Printable keys: [unshifted char, shifted char, code, keyCode, unshifted keysym, shifted keysym]. */
const printable: [string, string, string, number, string, string][] = [
  ['`', '~', 'Backquote', 192, 'grave', 'asciitilde'],
  ['-', '_', 'Minus', 189, 'minus', 'underscore'],
  ['=', '+', 'Equal', 187, 'equal', 'plus'],
  ['[', '{', 'BracketLeft', 219, 'bracketleft', 'braceleft'],
  [']', '}', 'BracketRight', 221, 'bracketright', 'braceright'],
  ['\\', '|', 'Backslash', 220, 'backslash', 'bar'],
  [';', ':', 'Semicolon', 186, 'semicolon', 'colon'],
  ["'", '"', 'Quote', 222, 'apostrophe', 'quotedbl'],
  [',', '<', 'Comma', 188, 'comma', 'less'],
  ['.', '>', 'Period', 190, 'period', 'greater'],
  ['/', '?', 'Slash', 191, 'slash', 'question'],
];
const digitShifted = ')!@#$%^&*(';
const digitKeysyms = [
  'parenright',
  'exclam',
  'at',
  'numbersign',
  'dollar',
  'percent',
  'asciicircum',
  'ampersand',
  'asterisk',
  'parenleft',
];
for (let d = 0; d <= 9; d++) {
  printable.push([String(d), digitShifted[d]!, `Digit${d}`, 48 + d, String(d), digitKeysyms[d]!]);
}
for (let i = 0; i < 26; i++) {
  const lower = String.fromCharCode(97 + i);
  const upper = lower.toUpperCase();
  printable.push([lower, upper, `Key${upper}`, 65 + i, lower, upper]);
}
for (const [plain, shift, code, keyCode, keysym, shiftKeysym] of printable) {
  const base: KeyDef = {
    keysym,
    key: plain,
    code,
    keyCode,
    text: plain,
    shifted: { key: shift, keysym: shiftKeysym },
  };
  const shiftedDef: KeyDef = { keysym: shiftKeysym, key: shift, code, keyCode, text: shift };
  byChar.set(plain, base);
  byChar.set(shift, shiftedDef);
  // X keysym names of punctuation (`plus`, `comma` …); letters are single characters already.
  if (keysym.length > 1) table.set(keysym.toLowerCase(), base);
  if (shiftKeysym.length > 1) table.set(shiftKeysym.toLowerCase(), shiftedDef);
}
const space: KeyDef = { keysym: 'space', key: ' ', code: 'Space', keyCode: 32, text: ' ' };
byChar.set(' ', space);
add(['space', 'spacebar'], space);
byChar.set('\n', table.get('enter')!);
byChar.set('\r', table.get('enter')!);
byChar.set('\t', table.get('tab')!);

/**
 * The key a name means, or `undefined` when the name is neither an alias, a US-layout
 * character nor a known X keysym. Single characters are matched exactly (`A` is shifted `a`),
 * names case-insensitively.
 */
export function lookupKey(name: string): KeyDef | undefined {
  if ([...name].length === 1) return byChar.get(name) ?? unicodeKey(name);
  return table.get(name.toLowerCase());
}

/** The key that types `char` on a US layout, without modifiers; `undefined` if none does. */
export function keyForChar(char: string): KeyDef | undefined {
  return byChar.get(char);
}

/** Any other single character: X types it through its Unicode keysym; the DOM has no code. */
function unicodeKey(char: string): KeyDef {
  const cp = char.codePointAt(0)!;
  return {
    keysym: `U${cp.toString(16).toUpperCase().padStart(4, '0')}`,
    key: char,
    code: '',
    keyCode: 0,
    text: char,
  };
}

/**
 * The keys of one `keys` entry: `ctrl+shift+t` is a chord of three keys (xdotool's syntax, which
 * agents often use), a lone `+` or a trailing `++` is the plus key.
 */
export function splitChord(entry: string): string[] {
  if (entry.length <= 1 || !entry.includes('+')) return [entry];
  const parts: string[] = [];
  let current = '';
  for (const ch of entry) {
    if (ch === '+' && current !== '') {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  if (current !== '') parts.push(current);
  return parts;
}

/** Every key named by a list of entries, chords expanded, in order. */
export function expandKeys(entries: readonly string[]): string[] {
  return entries.flatMap(splitChord);
}

/**
 * The X keysym for a key name: the table's when known, else the name itself (xdotool accepts
 * every keysym X knows, e.g. `XF86AudioMute`, and reports the ones it does not).
 */
export function xKeysym(name: string): string {
  return lookupKey(name)?.keysym ?? name;
}
