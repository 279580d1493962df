/** The ubuntu desktop's computer actions as xdotool arguments: pure translations, no display. */
import { describe, expect, it } from 'vitest';
import { ToolFailure } from '../../src/server/computer/failure.js';
import { resolveKeys, type Click, type Scroll } from '../../src/server/computer/runner.js';
import {
  clamp,
  clickCommand,
  cursorPosition,
  dragCommand,
  keysymOf,
  moveCommand,
  scrollCommand,
  TYPE_DELAY_MS,
  typeCommand,
  typingRuns,
  xKey,
  xyArgs,
  type XdotoolCommand,
} from '../../src/server/ubuntu/desktop/actions.js';
import { unknownKeyName, XDOTOOL_TIMEOUT_MS } from '../../src/server/ubuntu/desktop/xdotool.js';

const SCREEN = [1024, 768] as const;
const T = XDOTOOL_TIMEOUT_MS;
const keysyms = (entries: string[]) => resolveKeys(entries, xKey);

describe('coordinates', () => {
  it('rounds and clamps to the screen', () => {
    expect(clamp(3.5, 0, 10)).toBe(4);
    expect(clamp(-2, 0, 10)).toBe(0);
    expect(clamp(99, 0, 10)).toBe(10);
    expect(xyArgs([10, 20], SCREEN)).toEqual(['10', '20']);
    expect(xyArgs([-5, 5000], SCREEN)).toEqual(['0', '767']);
    expect(xyArgs([1024, 768], SCREEN)).toEqual(['1023', '767']);
  });
});

describe('pointer commands', () => {
  /** The command's arguments as one string, for reading. */
  const line = (c: XdotoolCommand | undefined) => c?.args.join(' ');

  it('moves the mouse', () => {
    expect(moveCommand([2000, -1], SCREEN)).toEqual({
      args: ['mousemove', '1023', '0'],
      timeoutMs: T,
    });
  });

  it('clicks: single without delay, repeated with 50 ms between, down and up alone', () => {
    const click = (extra: Partial<Click>) =>
      line(clickCommand({ button: 'left', kind: 'click', count: 1, ...extra }, SCREEN));
    expect(click({ at: [5, 6] })).toBe('mousemove 5 6 click --repeat 1 --delay 0 1');
    expect(click({ button: 'right', count: 2 })).toBe('click --repeat 2 --delay 50 3');
    expect(click({ button: 'middle', kind: 'down' })).toBe('mousedown 2');
    expect(click({ button: 'back', kind: 'up' })).toBe('mouseup 8');
    expect(click({ button: 'forward' })).toBe('click --repeat 1 --delay 0 9');
    expect(clickCommand({ button: 'left', kind: 'click', count: 1 }, SCREEN).timeoutMs).toBe(T);
  });

  it('drags along the path with the left button, the deadline growing with it', () => {
    const drag = dragCommand(
      [
        [1, 2],
        [3, 4],
        [5000, 6],
      ],
      SCREEN,
    );
    expect(line(drag)).toBe(
      'mousemove 1 2 mousedown 1 sleep 0.05 ' +
        'mousemove 3 4 sleep 0.01 mousemove 1023 6 sleep 0.01 ' +
        'sleep 0.05 mouseup 1',
    );
    expect(drag.timeoutMs).toBe(T + 2 * 50);
  });

  it('scrolls in notches: buttons 4/5 vertically, 6/7 horizontally', () => {
    const scroll = (s: Scroll) => scrollCommand(s, SCREEN);
    const both = scroll({ at: [10, 10], deltaY: 3, deltaX: -1.6 });
    expect(line(both)).toBe(
      'mousemove 10 10 click --repeat 3 --delay 10 5 click --repeat 2 --delay 10 6',
    );
    expect(both!.timeoutMs).toBe(T + 5 * 30);
    expect(line(scroll({ deltaX: 0, deltaY: -2 }))).toBe('click --repeat 2 --delay 10 4');
    expect(line(scroll({ deltaX: 1, deltaY: 0 }))).toBe('click --repeat 1 --delay 10 7');
    // half a notch rounds away from zero on both sides (|delta| is rounded)
    expect(line(scroll({ deltaX: 0, deltaY: -2.5 }))).toBe('click --repeat 3 --delay 10 4');
  });

  it('has nothing to do for a scroll of under half a notch without coordinates', () => {
    expect(scrollCommand({ deltaX: 0, deltaY: 0.4 }, SCREEN)).toBeUndefined();
    expect(scrollCommand({ deltaX: 0, deltaY: 0 }, SCREEN)).toBeUndefined();
    expect(line(scrollCommand({ at: [1, 1], deltaX: 0, deltaY: 0.2 }, SCREEN))).toBe(
      'mousemove 1 1',
    );
  });
});

describe('key names', () => {
  it('maps names, aliases and chords to X keysyms', () => {
    expect(keysyms(['ctrl+c'])).toEqual(['Control_L', 'c']);
    expect(keysyms(['Enter', 'esc', 'shift', 'F5'])).toEqual(['Return', 'Escape', 'Shift_L', 'F5']);
  });

  it('refuses names that are neither known nor plain keysym names', () => {
    expect(() => keysyms(['no such key!'])).toThrow(ToolFailure);
    expect(xKey('no such key!')).toBeUndefined();
    expect(xKey('XF86AudioMute')).toBe('XF86AudioMute');
    expect(() => keysyms(['no such key!'])).toThrow("Unknown key name 'no such key!'");
  });

  it('recognises the key names xdotool complains about', () => {
    expect(unknownKeyName("(symbol) No such key name 'Foo'. Ignoring it.")).toBe('Foo');
    expect(unknownKeyName("Invalid key sequence 'a+'")).toBe('a+');
    expect(unknownKeyName('')).toBeUndefined();
  });
});

describe('typing', () => {
  it('gives characters their X keysym: Latin-1 as is, others 0x1000000 + code point', () => {
    expect(keysymOf('a')).toBe(0x61);
    expect(keysymOf('é')).toBe(0xe9);
    expect(keysymOf('☃')).toBe(0x1002603);
    expect(keysymOf('😀')).toBe(0x1000000 + 0x1f600);
    expect(keysymOf('\n')).toBe(0x100000a);
  });

  it('cuts text into runs the US keymap types and runs that need keys bound first', () => {
    expect(typingRuns('hello')).toEqual([{ text: 'hello', remapped: false }]);
    expect(typingRuns('déjà vu ☃!')).toEqual([
      { text: 'd', remapped: false },
      { text: 'é', remapped: true },
      { text: 'j', remapped: false },
      { text: 'à', remapped: true },
      { text: ' vu ', remapped: false },
      { text: '☃', remapped: true },
      { text: '!', remapped: false },
    ]);
    expect(typingRuns('😀😀')).toEqual([{ text: '😀😀', remapped: true }]);
    expect(typingRuns('')).toEqual([]);
  });

  it('types a run from stdin with a deadline that grows with its characters', () => {
    expect(typeCommand({ text: 'ab😀', remapped: true })).toEqual({
      args: ['type', '--delay', String(TYPE_DELAY_MS), '--file', '-'],
      timeoutMs: T + 3 * TYPE_DELAY_MS * 4,
    });
  });
});

describe('cursorPosition', () => {
  it('reads `getmouselocation --shell`', () => {
    expect(cursorPosition('X=12\nY=-3\nSCREEN=0\nWINDOW=123\n')).toEqual([12, -3]);
    expect(() => cursorPosition('oops')).toThrow('unexpected xdotool output: oops');
  });
});
