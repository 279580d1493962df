/**
 * The pure parts of burrow-sandbox/agents and the MCP snapshot: vendor actions ↔ burrow actions
 * with scaling, the errors that name what a vocabulary cannot say, the display size rule, the
 * screenshot resampler, and the accessibility snapshot's text and references.
 */
import { describe, expect, it } from 'vitest';
import {
  anthropicDisplaySize,
  fromAnthropicComputer,
  fromOpenAIAction,
  Scaler,
  toAnthropicComputer,
  toOpenAIAction,
  UnsupportedActionError,
  type AnthropicComputerInput,
  type OpenAIComputerAction,
} from 'burrow-sandbox/agents';
import type { ComputerAction } from '../../src/api/index.js';
import { decodePng, encodeRgb, resample } from '../../src/agents/image.js';
import { renderSnapshot, type AXNode } from '../../src/server/mcp/snapshot.js';

const same = new Scaler([1024, 768], [1024, 768]);
const half = new Scaler([2048, 1536], [1024, 768]);

describe('Anthropic display size', () => {
  it('keeps screens within the limits and scales larger ones down, aspect kept', () => {
    expect(anthropicDisplaySize([1024, 768])).toEqual([1024, 768]);
    expect(anthropicDisplaySize([1280, 800])).toEqual([1280, 800]);
    expect(anthropicDisplaySize([1920, 1080])).toEqual([1429, 804]);
    const [w, h] = anthropicDisplaySize([3000, 1000]);
    expect(w).toBeLessThanOrEqual(1568);
    expect(w * h).toBeLessThanOrEqual(1_150_000);
    expect(w / h).toBeCloseTo(3, 1);
  });
});

describe('Anthropic computer → burrow', () => {
  const cases: [AnthropicComputerInput, ComputerAction[]][] = [
    [{ action: 'screenshot' }, [{ action: 'take_screenshot' }]],
    [
      { action: 'left_click', coordinate: [10, 20] },
      [{ action: 'click_mouse', button: 'left', num_clicks: 1, coordinates: [20, 40] }],
    ],
    [
      { action: 'left_click', coordinate: [10, 20], text: 'ctrl+shift' },
      [
        {
          action: 'click_mouse',
          button: 'left',
          num_clicks: 1,
          coordinates: [20, 40],
          hold_keys: ['ctrl', 'shift'],
        },
      ],
    ],
    [{ action: 'triple_click' }, [{ action: 'click_mouse', button: 'left', num_clicks: 3 }]],
    [{ action: 'middle_click' }, [{ action: 'click_mouse', button: 'middle', num_clicks: 1 }]],
    [
      { action: 'left_click_drag', start_coordinate: [1, 2], coordinate: [3, 4] },
      [
        {
          action: 'drag_mouse',
          path: [
            [2, 4],
            [6, 8],
          ],
        },
      ],
    ],
    [
      { action: 'scroll', coordinate: [5, 5], scroll_direction: 'left', scroll_amount: 4 },
      [{ action: 'scroll', coordinates: [10, 10], delta_x: -4 }],
    ],
    [
      { action: 'key', text: 'ctrl+a Delete' },
      [
        { action: 'press_key', keys: ['ctrl', 'a'] },
        { action: 'press_key', keys: ['Delete'] },
      ],
    ],
    [
      { action: 'hold_key', text: 'shift', duration: 1.5 },
      [{ action: 'press_key', keys: ['shift'], duration: 1.5 }],
    ],
    [
      { action: 'left_mouse_down', coordinate: [7, 8] },
      [{ action: 'click_mouse', button: 'left', click_type: 'down', coordinates: [14, 16] }],
    ],
    [{ action: 'cursor_position' }, [{ action: 'get_cursor_position' }]],
    [{ action: 'wait', duration: 2 }, [{ action: 'wait', duration: 2 }]],
  ];
  it.each(cases)('%j', (input, expected) => {
    expect(fromAnthropicComputer(input, half)).toEqual(expected);
  });

  it('zoom exists only in computer_20251124; unknown actions are named', () => {
    expect(fromAnthropicComputer({ action: 'zoom', region: [0, 0, 10, 10] }, same)).toEqual([
      { action: 'zoom', region: [0, 0, 10, 10] },
    ]);
    expect(() =>
      fromAnthropicComputer({ action: 'zoom', region: [0, 0, 1, 1] }, same, 'computer_20250124'),
    ).toThrow(/"zoom".*computer_20250124 has no zoom/);
    expect(() => fromAnthropicComputer({ action: 'paste' }, same)).toThrow(UnsupportedActionError);
    expect(() => fromAnthropicComputer({ action: 'paste' }, same)).toThrow(/"paste"/);
  });
});

describe('burrow → Anthropic computer, and back', () => {
  const roundTrip: ComputerAction[] = [
    { action: 'move_mouse', coordinates: [100, 200] },
    { action: 'click_mouse', button: 'right', num_clicks: 1, coordinates: [4, 6] },
    { action: 'click_mouse', button: 'left', num_clicks: 2, coordinates: [4, 6] },
    {
      action: 'drag_mouse',
      path: [
        [0, 0],
        [20, 40],
      ],
    },
    { action: 'scroll', coordinates: [50, 50], delta_y: 3 },
    { action: 'press_key', keys: ['ctrl', 'c'] },
    { action: 'type_text', text: 'hi' },
    { action: 'take_screenshot' },
    { action: 'get_cursor_position' },
  ];
  it.each(roundTrip)('%j', (action) => {
    expect(fromAnthropicComputer(toAnthropicComputer(action, half), half)).toEqual([action]);
  });

  it('scales screen coordinates to the model', () => {
    expect(toAnthropicComputer({ action: 'move_mouse', coordinates: [100, 200] }, half)).toEqual({
      action: 'mouse_move',
      coordinate: [50, 100],
    });
  });

  it('names what Claude cannot express', () => {
    const say = (a: ComputerAction) => () => toAnthropicComputer(a, same);
    expect(say({ action: 'click_mouse', button: 'back' })).toThrow(/"click_mouse".*back/);
    expect(
      say({
        action: 'drag_mouse',
        path: [
          [0, 0],
          [1, 1],
          [2, 2],
        ],
      }),
    ).toThrow(/"drag_mouse".*not 3/);
    expect(say({ action: 'scroll', coordinates: [1, 1], delta_x: 1, delta_y: 1 })).toThrow(
      /one direction/,
    );
    expect(say({ action: 'type_text', text: 'x', hold_keys: ['shift'] })).toThrow(/"type_text"/);
  });
});

describe('OpenAI ↔ burrow', () => {
  const cases: [OpenAIComputerAction, ComputerAction][] = [
    [
      { type: 'click', x: 10, y: 10, button: 'wheel' },
      { action: 'click_mouse', button: 'middle', coordinates: [20, 20] },
    ],
    [
      { type: 'click', x: 10, y: 10, button: 'back' },
      { action: 'click_mouse', button: 'back', coordinates: [20, 20] },
    ],
    [
      { type: 'double_click', x: 1, y: 2 },
      { action: 'click_mouse', button: 'left', num_clicks: 2, coordinates: [2, 4] },
    ],
    [
      {
        type: 'drag',
        path: [
          { x: 1, y: 1 },
          { x: 2, y: 2 },
          { x: 3, y: 3 },
        ],
      },
      {
        action: 'drag_mouse',
        path: [
          [2, 2],
          [4, 4],
          [6, 6],
        ],
      },
    ],
    [
      { type: 'keypress', keys: ['CTRL', 'L'] },
      { action: 'press_key', keys: ['CTRL', 'L'] },
    ],
    [
      { type: 'move', x: 5, y: 6, keys: ['SHIFT'] },
      { action: 'move_mouse', coordinates: [10, 12], hold_keys: ['SHIFT'] },
    ],
    [
      { type: 'scroll', x: 5, y: 5, scroll_x: -200, scroll_y: 350 },
      { action: 'scroll', coordinates: [10, 10], delta_x: -2, delta_y: 4 },
    ],
    [
      { type: 'type', text: 'abc' },
      { action: 'type_text', text: 'abc' },
    ],
    [{ type: 'wait' }, { action: 'wait', duration: 2 }],
    [{ type: 'screenshot' }, { action: 'take_screenshot' }],
  ];
  it.each(cases)('%j', (openai, burrow) => {
    expect(fromOpenAIAction(openai, half)).toEqual(burrow);
  });

  it('maps burrow actions back, scaled, and names what OpenAI cannot express', () => {
    expect(
      toOpenAIAction({ action: 'click_mouse', button: 'middle', coordinates: [20, 20] }, half),
    ).toEqual({ type: 'click', button: 'wheel', x: 10, y: 10 });
    expect(toOpenAIAction({ action: 'scroll', coordinates: [4, 4], delta_y: -2 }, half)).toEqual({
      type: 'scroll',
      x: 2,
      y: 2,
      scroll_x: 0,
      scroll_y: -200,
    });
    expect(() => toOpenAIAction({ action: 'get_cursor_position' }, same)).toThrow(
      /openai computer action "get_cursor_position"/,
    );
    expect(() => toOpenAIAction({ action: 'press_key', keys: ['a'], duration: 1 }, same)).toThrow(
      /"press_key"/,
    );
    expect(() =>
      toOpenAIAction({ action: 'click_mouse', button: 'left', click_type: 'down' }, same),
    ).toThrow(/"click_mouse"/);
    expect(() => fromOpenAIAction({ type: 'levitate' } as never, same)).toThrow(/"levitate"/);
  });
});

describe('screenshots as the model sees them', () => {
  it('resamples by averaging and keeps PNGs readable', async () => {
    // 4×2: left half black, right half white
    const data = Buffer.alloc(4 * 2 * 3);
    for (let y = 0; y < 2; y++) data.fill(255, (y * 4 + 2) * 3, (y * 4 + 4) * 3);
    const png = await encodeRgb({ width: 4, height: 2, data });
    const back = await decodePng(png);
    expect(back).toEqual({ width: 4, height: 2, data });
    const small = resample(back, [0, 0, 4, 2], 2, 1);
    expect([...small.data]).toEqual([0, 0, 0, 255, 255, 255]);
    const mid = resample(back, [1, 0, 3, 2], 1, 1);
    expect([...mid.data]).toEqual([128, 128, 128]);
    const scaled = await new Scaler([4, 2], [2, 1]).image(png.toString('base64'));
    expect(await decodePng(Buffer.from(scaled, 'base64'))).toEqual(small);
  });
});

describe('the accessibility snapshot', () => {
  it('renders roles, names, states and refs; skips ignored and nameless generic nodes', () => {
    const nodes: AXNode[] = [
      { nodeId: '1', role: { value: 'RootWebArea' }, name: { value: 'T' }, childIds: ['2', '7'] },
      { nodeId: '2', parentId: '1', role: { value: 'generic' }, childIds: ['3', '4', '5'] },
      {
        nodeId: '3',
        parentId: '2',
        role: { value: 'heading' },
        name: { value: 'Title' },
        properties: [{ name: 'level', value: { value: 2 } }],
        childIds: ['6'],
        backendDOMNodeId: 30,
      },
      {
        nodeId: '4',
        parentId: '2',
        role: { value: 'checkbox' },
        name: { value: 'Agree' },
        properties: [{ name: 'checked', value: { value: 'true' } }],
        backendDOMNodeId: 40,
      },
      {
        nodeId: '5',
        parentId: '2',
        role: { value: 'textbox' },
        name: { value: 'Name' },
        value: { value: 'Ada' },
        backendDOMNodeId: 50,
      },
      { nodeId: '6', parentId: '3', role: { value: 'StaticText' }, name: { value: 'Title' } },
      { nodeId: '7', parentId: '1', ignored: true, childIds: ['8'] },
      { nodeId: '8', parentId: '7', role: { value: 'StaticText' }, name: { value: 'loose text' } },
    ];
    const snap = renderSnapshot(nodes);
    expect(snap.text).toBe(
      [
        '- RootWebArea "T"',
        '  - heading "Title" [level=2] [ref=e1]',
        '  - checkbox "Agree" [checked] [ref=e2]',
        '  - textbox "Name" [ref=e3]: "Ada"',
        '  - text: "loose text"',
      ].join('\n'),
    );
    expect([...snap.refs]).toEqual([
      ['e1', 30],
      ['e2', 40],
      ['e3', 50],
    ]);
  });
});
