/**
 * The `computer` action union (COMPAT.md "computer actions"): discriminated by `action`; every
 * action also takes `screenshot` (default true: a PNG after the action in `base64_image`).
 */
import { z } from 'zod';

/** Absolute integer pixels from the top-left: `[x, y]`. */
export const Coordinates = z.tuple([z.int(), z.int()]);
export type Coordinates = z.output<typeof Coordinates>;

export const MOUSE_BUTTONS = ['left', 'right', 'middle', 'back', 'forward'] as const;
export const MouseButton = z.enum(MOUSE_BUTTONS);
export type MouseButton = z.output<typeof MouseButton>;

const keyName = z.string().min(1).max(64);
const holdKeys = z.array(keyName).max(8).optional();
const screenshot = z.boolean().optional();
/** Seconds; bounded so that no single call can hold the server for long. */
const seconds = z.number().min(0).max(60);

export const MoveMouseAction = z.object({
  action: z.literal('move_mouse'),
  coordinates: Coordinates,
  hold_keys: holdKeys,
  screenshot,
});
export const ClickMouseAction = z.object({
  action: z.literal('click_mouse'),
  button: MouseButton,
  click_type: z.enum(['down', 'up', 'click']).optional(),
  coordinates: Coordinates.optional(),
  num_clicks: z.int().min(1).max(10).optional(),
  hold_keys: holdKeys,
  screenshot,
});
export const DragMouseAction = z.object({
  action: z.literal('drag_mouse'),
  path: z.array(Coordinates).min(1).max(1000),
  hold_keys: holdKeys,
  screenshot,
});
export const ScrollAction = z.object({
  action: z.literal('scroll'),
  coordinates: Coordinates.optional(),
  /** Wheel notches, positive = right. */
  delta_x: z.number().min(-1000).max(1000).optional(),
  /** Wheel notches, positive = down. */
  delta_y: z.number().min(-1000).max(1000).optional(),
  hold_keys: holdKeys,
  screenshot,
});
export const PressKeyAction = z.object({
  action: z.literal('press_key'),
  keys: z.array(keyName).min(1).max(16),
  /** Seconds the keys are held. */
  duration: seconds.optional(),
  screenshot,
});
export const TypeTextAction = z.object({
  action: z.literal('type_text'),
  text: z.string().max(100_000),
  hold_keys: holdKeys,
  screenshot,
});
export const WaitAction = z.object({
  action: z.literal('wait'),
  /** Seconds. */
  duration: seconds,
  screenshot,
});
export const TakeScreenshotAction = z.object({
  action: z.literal('take_screenshot'),
  screenshot,
});
export const GetCursorPositionAction = z.object({
  action: z.literal('get_cursor_position'),
  screenshot,
});

export const ComputerAction = z.discriminatedUnion('action', [
  MoveMouseAction,
  ClickMouseAction,
  DragMouseAction,
  ScrollAction,
  PressKeyAction,
  TypeTextAction,
  WaitAction,
  TakeScreenshotAction,
  GetCursorPositionAction,
]);
export type ComputerAction = z.input<typeof ComputerAction>;
export type ParsedComputerAction = z.output<typeof ComputerAction>;
