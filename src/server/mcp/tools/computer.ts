/** `computer_<action>`: every action of the `computer` operation, one tool each (screen pixels). */
import type { z } from 'zod';
import {
  ClickMouseAction,
  DragMouseAction,
  GetCursorPositionAction,
  MoveMouseAction,
  PressKeyAction,
  ScrollAction,
  TakeScreenshotAction,
  TypeTextAction,
  WaitAction,
} from '../../../api/computer.js';
import type { ComputerAction } from '../../../api/index.js';
import { defineTool, instanceId, toolResultContent } from './common.js';

const actions = [
  ['move_mouse', MoveMouseAction, 'Move the mouse pointer to coordinates [x, y].'],
  [
    'click_mouse',
    ClickMouseAction,
    'Click (or press/release) a mouse button, at coordinates or where the pointer is.',
  ],
  ['drag_mouse', DragMouseAction, 'Drag with the left button held along a path of points.'],
  ['scroll', ScrollAction, 'Scroll by wheel notches (positive delta_y = down).'],
  ['press_key', PressKeyAction, 'Press keys together (X keysyms such as "ctrl", "Return").'],
  ['type_text', TypeTextAction, 'Type text.'],
  ['wait', WaitAction, 'Wait a number of seconds.'],
  ['take_screenshot', TakeScreenshotAction, 'Screenshot of the whole screen.'],
  ['get_cursor_position', GetCursorPositionAction, 'Where the mouse pointer is.'],
] as const;

export const computerTools = actions.map(([action, schema, description]) =>
  defineTool({
    name: `computer_${action}`,
    description: `${description} Screen pixels of the instance; a screenshot follows unless screenshot is false.`,
    // the action's own schema without its discriminator: the MCP server has parsed the fields
    input: (schema as z.ZodObject).omit({ action: true }).extend({ instance_id: instanceId }),
    annotations: { readOnlyHint: action === 'take_screenshot' || action === 'get_cursor_position' },
    async handler(ctx, args) {
      const { instance_id, ...rest } = args as { instance_id?: string };
      const id = ctx.target(instance_id);
      const r =
        action === 'take_screenshot'
          ? { base64_image: await ctx.backend.screenshot(id) }
          : await ctx.backend.computer(id, { action, ...rest } as ComputerAction);
      return ctx.about(id, toolResultContent(r));
    },
  }),
);
