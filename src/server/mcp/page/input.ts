/**
 * Mouse and keyboard of the browser tools: clicks, hovering, drag and drop, key presses and
 * typing into an element of the snapshot. They go through the server's one CDP input layer
 * (../../chromium/keyboard.ts, mouse.ts) and name keys from its one key table
 * (../../computer/keys.ts), as the computer actions do: a key press is Playwright's (`Enter`,
 * `ArrowLeft`, `a`, modifiers joined by `+`: `Control+a`), and modifiers are pressed as keys
 * around a click, as Playwright does.
 */
import { Keyboard } from '../../chromium/keyboard.js';
import { dragEvent, Mouse } from '../../chromium/mouse.js';
import { expandKeys, lookupKey, type KeyDef } from '../../computer/keys.js';
import { fail, type PageConnection } from './connection.js';
import { watchNavigation } from './navigation.js';

/** Playwright's key names the key table spells otherwise: `ControlOrMeta` is Control on Linux. */
const PLAYWRIGHT_KEYS: Readonly<Record<string, string>> = { ControlOrMeta: 'Control' };

/** The keys of a Playwright key name or chord (`Control+Shift+T`); a tool failure if unknown. */
function keysOf(names: readonly string[]): KeyDef[] {
  return expandKeys(names).map((name) => {
    const def = lookupKey(PLAYWRIGHT_KEYS[name] ?? name);
    if (!def) throw fail(`Unknown key ${JSON.stringify(name)}`, 'validation_error');
    return def;
  });
}

/** `fn` with `held` pressed on the current tab, released whatever happens. */
async function holding(
  c: PageConnection,
  held: readonly KeyDef[],
  fn: (keyboard: Keyboard) => Promise<void>,
): Promise<void> {
  const keyboard = new Keyboard(c.page);
  try {
    for (const k of held) await keyboard.down(k);
    await fn(keyboard);
  } finally {
    await keyboard.releaseAll();
  }
}

export async function click(
  c: PageConnection,
  ref: string,
  opts: { button?: 'left' | 'right' | 'middle'; doubleClick?: boolean; modifiers?: string[] },
): Promise<void> {
  const { x, y } = await c.element(ref);
  const held = keysOf(opts.modifiers ?? []);
  await c.act(async () => {
    const nav = watchNavigation(c);
    await holding(c, held, async (keyboard) => {
      const mouse = new Mouse([x, y]);
      await mouse.move(c.page, [x, y], keyboard.modifiers);
      await mouse.click(
        c.page,
        opts.button ?? 'left',
        opts.doubleClick ? 2 : 1,
        keyboard.modifiers,
      );
    });
    await nav.settle();
  });
}

export async function hover(c: PageConnection, ref: string): Promise<void> {
  const { x, y } = await c.element(ref);
  await c.act(() => new Mouse([x, y]).move(c.page, [x, y]));
}

/**
 * Presses a key, Playwright-style: a key name (`Enter`, `ArrowLeft`, `Backspace`…) or one
 * character, with modifiers joined by `+` (`Control+a`, `Shift+Tab`), on the focused element.
 */
export async function pressKey(c: PageConnection, key: string): Promise<void> {
  const keys = keysOf([key]);
  await c.act(async () => {
    const nav = watchNavigation(c);
    await new Keyboard(c.page).press(keys);
    await nav.settle();
  });
}

/** Replaces the element's text with `text` (as typing would), then Enter if `submit`. */
export async function type(
  c: PageConnection,
  ref: string,
  text: string,
  submit: boolean,
): Promise<void> {
  const objectId = await c.objectOf(ref);
  await c.callOn(
    objectId,
    `function () {
      this.focus();
      if (this.isContentEditable) {
        const range = document.createRange();
        range.selectNodeContents(this);
        const sel = getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
      } else if (typeof this.select === 'function') {
        this.select();
      }
    }`,
  );
  const keyboard = new Keyboard(c.page);
  if (text) await keyboard.insertText(text);
  else await keyboard.press(keysOf(['Delete']));
  if (!submit) return;
  await pressKey(c, 'Enter');
}

/**
 * Drags the element of `from` onto the element of `to` with the left button held: mouse
 * events, and when the page starts an HTML5 drag (Chromium hands it over, intercepted, instead
 * of running its own drag loop) the drag events of that drag, ending with a drop.
 */
export async function drag(c: PageConnection, from: string, to: string): Promise<void> {
  const a = await c.element(from);
  const b = await c.element(to);
  const { page } = c;
  let data: unknown;
  const off = c.cdp.on('Input.dragIntercepted', (p, s) => {
    if (s === page.sessionId) data = (p as { data: unknown }).data;
  });
  try {
    await c.send('Input.setInterceptDrags', { enabled: true });
    await c.act(async () => {
      const mouse = new Mouse([a.x, a.y]);
      await mouse.move(page, [a.x, a.y]);
      await mouse.button(page, 'mousePressed', 'left', 1);
      const steps = 8;
      let entered = false;
      for (let i = 1; i <= steps; i++) {
        const at = [a.x + ((b.x - a.x) * i) / steps, a.y + ((b.y - a.y) * i) / steps] as const;
        if (data === undefined) {
          await mouse.move(page, at);
        } else {
          if (!entered) await dragEvent(page, 'dragEnter', at, data);
          entered = true;
          await dragEvent(page, 'dragOver', at, data);
        }
      }
      if (data !== undefined) {
        if (!entered) await dragEvent(page, 'dragEnter', [b.x, b.y], data);
        await dragEvent(page, 'drop', [b.x, b.y], data);
      }
      // the button goes up over the target, where the drop (or the last move) was
      mouse.x = b.x;
      mouse.y = b.y;
      await mouse.button(page, 'mouseReleased', 'left', 1);
    });
  } finally {
    off();
    await c.send('Input.setInterceptDrags', { enabled: false }).catch(() => undefined);
  }
}
