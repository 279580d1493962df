/**
 * The mouse of a page over CDP `Input.*`, the one way the server points and clicks in a tab: the
 * computer actions of a browser instance and its live view (input.ts) and the MCP browser tools
 * (../mcp/page/) move, press and drag through this module. CDP has no pointer of its own, so the
 * mouse remembers where it is and which buttons it holds, and sends them with every event as
 * Playwright does (`button` and `buttons` on moves too, so that a page sees a drag as one).
 */
import type { MouseButton } from '../../api/index.js';
import type { CdpParams } from './cdp.js';
import { sendInput, type PageTarget } from './keyboard.js';

/** DOM `buttons` bit of each button. */
const BUTTON_BIT: Readonly<Record<MouseButton, number>> = {
  left: 1,
  right: 2,
  middle: 4,
  back: 8,
  forward: 16,
};

/** A mouse event as the live view's viewer sends it (screencast.ts). */
export interface MouseEventParams {
  type: 'mousePressed' | 'mouseReleased' | 'mouseMoved' | 'mouseWheel';
  x: number;
  y: number;
  button?: MouseButton | 'none' | undefined;
  buttons?: number | undefined;
  clickCount?: number | undefined;
  modifiers?: number | undefined;
  deltaX?: number | undefined;
  deltaY?: number | undefined;
}

export class Mouse {
  x: number;
  y: number;
  /** DOM `buttons` bitmask of the buttons held. */
  buttons = 0;

  /** A mouse at `[x, y]` with no button held. */
  constructor([x, y]: readonly [number, number]) {
    this.x = x;
    this.y = y;
  }

  /** Move to `[x, y]` (with the buttons held, a drag). */
  async move(page: PageTarget, [x, y]: readonly [number, number], modifiers = 0): Promise<void> {
    this.x = x;
    this.y = y;
    await sendInput(page, 'Input.dispatchMouseEvent', {
      type: 'mouseMoved',
      x,
      y,
      button: pressedButton(this.buttons),
      buttons: this.buttons,
      modifiers,
      pointerType: 'mouse',
    });
  }

  /** Press or release `button` where the mouse is; `clickCount` counts a double click's second. */
  async button(
    page: PageTarget,
    type: 'mousePressed' | 'mouseReleased',
    button: MouseButton,
    clickCount: number,
    modifiers = 0,
  ): Promise<void> {
    if (type === 'mousePressed') this.buttons |= BUTTON_BIT[button];
    else this.buttons &= ~BUTTON_BIT[button];
    await sendInput(page, 'Input.dispatchMouseEvent', {
      type,
      x: this.x,
      y: this.y,
      button,
      buttons: this.buttons,
      clickCount,
      modifiers,
      pointerType: 'mouse',
    });
  }

  /** `count` clicks of `button` where the mouse is (2: a double click). */
  async click(page: PageTarget, button: MouseButton, count: number, modifiers = 0): Promise<void> {
    for (let n = 1; n <= count; n++) {
      await this.button(page, 'mousePressed', button, n, modifiers);
      await this.button(page, 'mouseReleased', button, n, modifiers);
    }
  }

  /** Turn the wheel where the mouse is, by pixels. */
  async wheel(page: PageTarget, deltaX: number, deltaY: number, modifiers = 0): Promise<void> {
    await sendInput(page, 'Input.dispatchMouseEvent', {
      type: 'mouseWheel',
      x: this.x,
      y: this.y,
      deltaX,
      deltaY,
      modifiers,
      pointerType: 'mouse',
    });
  }

  /** One event as given (the live view's), the remembered position and buttons kept in step. */
  async dispatch(page: PageTarget, params: MouseEventParams): Promise<void> {
    this.x = params.x;
    this.y = params.y;
    if (params.buttons !== undefined) this.buttons = params.buttons;
    await sendInput(page, 'Input.dispatchMouseEvent', { pointerType: 'mouse', ...params });
  }
}

/**
 * One event of an HTML5 drag Chromium handed over (`Input.setInterceptDrags`,
 * `Input.dragIntercepted`'s `data`): `dragEnter`, `dragOver`, `drop` or `dragCancel` at `[x, y]`.
 */
export async function dragEvent(
  page: PageTarget,
  type: 'dragEnter' | 'dragOver' | 'drop' | 'dragCancel',
  [x, y]: readonly [number, number],
  data: unknown,
): Promise<void> {
  const params: CdpParams = { type, x, y, data };
  await sendInput(page, 'Input.dispatchDragEvent', params);
}

/** The `button` CDP wants on a move: the first held one, or none. */
function pressedButton(buttons: number): MouseButton | 'none' {
  for (const [name, bit] of Object.entries(BUTTON_BIT) as [MouseButton, number][]) {
    if (buttons & bit) return name;
  }
  return 'none';
}
