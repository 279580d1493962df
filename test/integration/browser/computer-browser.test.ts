/**
 * `computer` and `screenshot` on a browser instance, through the real HTTP server: CDP input on
 * the active tab in the coordinate system of its screenshots, checked against what the page saw.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, instanceProcesses, pngSize } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';
import {
  decodePng,
  findColor,
  GO_COLOR,
  LAYOUT,
  PageProbe,
  startPlayground,
  type Playground,
} from '../../helpers/computer.js';

let site: Playground;
let page: PageProbe;

beforeAll(async () => {
  site = await startPlayground();
});
afterAll(async () => {
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});
const server = useServer();
const instance = useInstance(server, 'browser', { resolution: [800, 600] });
beforeAll(async () => {
  page = await PageProbe.open(instance.cdpUrl, site.url);
});
afterAll(() => {
  page?.close();
});

interface Result {
  output?: string;
  error?: string;
  base64_image?: string;
}

async function computer(action: Record<string, unknown>): Promise<Result> {
  const res = await server.api(`/v1/instance/${instance.id}/computer`, { json: action });
  expect(res.status).toBe(200);
  return (await res.json()) as Result;
}

const image = (r: Result) => Buffer.from(r.base64_image ?? '', 'base64');
const center = (b: { x: number; y: number; w: number; h: number }) => [
  Math.round(b.x + b.w / 2),
  Math.round(b.y + b.h / 2),
];

describe('computer actions on a browser instance', () => {
  it('screenshot is a PNG of the viewport at the instance resolution', async () => {
    const res = await server.api(`/v1/instance/${instance.id}/screenshot`, { method: 'POST' });
    expect(res.status).toBe(200);
    const png = Buffer.from(
      ((await res.json()) as { base64_image: string }).base64_image,
      'base64',
    );
    expect(pngSize(png)).toEqual([800, 600]);
    // the button is where the page put it: screenshots and input share coordinates
    expect(findColor(decodePng(png), GO_COLOR)).toEqual(LAYOUT.go);
  });

  it('clicks a button by coordinates; the screenshot after it shows the change', async () => {
    const before = await computer({ action: 'take_screenshot' });
    const after = await computer({
      action: 'click_mouse',
      button: 'left',
      coordinates: center(LAYOUT.go),
    });
    expect(after.error).toBeUndefined();
    expect((await page.state()).clicks).toBe(1);
    expect(pngSize(image(after))).toEqual([800, 600]);
    expect(after.base64_image).not.toBe(before.base64_image);
    expect(findColor(decodePng(image(after)), GO_COLOR)).toBeUndefined(); // no longer green
  });

  it('double, right and modifier clicks', async () => {
    const [x, y] = center(LAYOUT.go);
    await computer({
      action: 'click_mouse',
      button: 'left',
      coordinates: [x, y],
      num_clicks: 2,
      screenshot: false,
    });
    await computer({
      action: 'click_mouse',
      button: 'right',
      coordinates: [x, y],
      screenshot: false,
    });
    await computer({
      action: 'click_mouse',
      button: 'left',
      hold_keys: ['shift'],
      screenshot: false,
    });
    const s = await page.state();
    expect(s.dblclicks).toBe(1);
    expect(s.rightClicks).toBe(1);
    expect(s.shiftClicks).toBe(1);
    // modifiers are released afterwards
    await computer({ action: 'click_mouse', button: 'left', screenshot: false });
    expect((await page.state()).shiftClicks).toBe(1);
  });

  it('types into a field, with chords and hold_keys', async () => {
    await computer({
      action: 'click_mouse',
      button: 'left',
      coordinates: center(LAYOUT.field),
      screenshot: false,
    });
    await computer({ action: 'type_text', text: 'hello wörld 😀', screenshot: false });
    expect((await page.state()).value).toBe('hello wörld 😀');
    await computer({ action: 'press_key', keys: ['ctrl', 'a'], screenshot: false });
    await computer({ action: 'type_text', text: 'abc', hold_keys: ['shift'], screenshot: false });
    expect((await page.state()).value).toBe('ABC');
    await computer({ action: 'press_key', keys: ['ctrl+a'], screenshot: false });
    await computer({ action: 'press_key', keys: ['BackSpace'], screenshot: false });
    await computer({ action: 'type_text', text: 'x', screenshot: false });
    await computer({ action: 'press_key', keys: ['arrowleft'], duration: 0.1, screenshot: false });
    await computer({ action: 'press_key', keys: ['Return'], screenshot: false });
    const s = await page.state();
    expect(s.value).toBe('x');
    expect(s.keys).toEqual(
      expect.arrayContaining(['C-a', 'S-A', 'Backspace', 'ArrowLeft', 'Enter']),
    );
  });

  it('an unknown key is a tool error (HTTP 200 with error)', async () => {
    const r = await computer({ action: 'press_key', keys: ['nosuchkey'], screenshot: false });
    expect(r.error).toMatch(/Unknown key name 'nosuchkey'/);
    expect(r.base64_image).toBeUndefined();
  });

  it('drags along a path', async () => {
    const { x, y } = LAYOUT.pad;
    const path = [
      [x + 10, y + 10],
      [x + 60, y + 40],
      [x + 120, y + 90],
      [x + 200, y + 150],
    ];
    await computer({ action: 'drag_mouse', path, screenshot: false });
    const { drag } = await page.state();
    expect(drag[0]).toEqual(path[0]);
    expect(drag.at(-1)).toEqual(path.at(-1));
    expect(drag.length).toBeGreaterThanOrEqual(path.length);
  });

  it('moves the mouse, reports and clamps the position', async () => {
    await computer({ action: 'move_mouse', coordinates: [123, 45], screenshot: false });
    expect((await computer({ action: 'get_cursor_position', screenshot: false })).output).toBe(
      'X=123,Y=45',
    );
    await computer({ action: 'move_mouse', coordinates: [5000, -20], screenshot: false });
    expect((await computer({ action: 'get_cursor_position', screenshot: false })).output).toBe(
      'X=799,Y=0',
    );
  });

  it('scrolls in wheel notches at the pointer', async () => {
    await computer({ action: 'scroll', coordinates: [400, 400], delta_y: 3, screenshot: false });
    await eventually(
      async () => (await page.state()).scrollY === 300,
      'the page to scroll 3 notches',
    );
    await computer({ action: 'scroll', delta_y: -3, screenshot: false });
    await eventually(async () => (await page.state()).scrollY === 0, 'the page to scroll back');
  });

  it('wait and take_screenshot return a screenshot; screenshot:false returns none', async () => {
    const t0 = Date.now();
    const waited = await computer({ action: 'wait', duration: 0.3 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(pngSize(image(waited))).toEqual([800, 600]);
    expect(await computer({ action: 'wait', duration: 0, screenshot: false })).toEqual({});
  });

  it('an invalid action is a 422', async () => {
    const res = await server.api(`/v1/instance/${instance.id}/computer`, {
      json: { action: 'click_mouse', button: 'sideways' },
    });
    expect(res.status).toBe(422);
  });
});
