/**
 * `computer`, `screenshot` and the desktop browser of an ubuntu instance, through the real HTTP
 * server: xdotool on the instance's Xvfb, a headful Chromium on that display found purely from
 * screenshots, its page state checked over CDP, and nothing left running after stop.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  instancePids,
  instanceProcesses,
  pngSize,
  testServer,
  type TestServer,
} from '../../helpers/server.js';
import {
  alive,
  commName,
  decodePng,
  findColor,
  GO_COLOR,
  LAYOUT,
  PAD_COLOR,
  PageProbe,
  processTree,
  startPlayground,
  type Playground,
} from '../../helpers/computer.js';

let server: TestServer;
let site: Playground;
let id: string;
let page: PageProbe;
/** Screen position of the page's (0, 0). */
let origin: { x: number; y: number };

beforeAll(async () => {
  [server, site] = await Promise.all([testServer(), startPlayground()]);
  const res = await server.api('/v1/start', {
    json: { instance_type: 'ubuntu', resolution: [1024, 768] },
  });
  expect(res.status).toBe(200);
  id = ((await res.json()) as { id: string }).id;
});
afterAll(async () => {
  page?.close();
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

interface Result {
  output?: string;
  error?: string;
  base64_image?: string;
}

async function computer(action: Record<string, unknown>): Promise<Result> {
  const res = await server.api(`/v1/instance/${id}/computer`, { json: action });
  expect(res.status).toBe(200);
  return (await res.json()) as Result;
}

async function screenshot(): Promise<Buffer> {
  const res = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
  expect(res.status).toBe(200);
  return Buffer.from(((await res.json()) as { base64_image: string }).base64_image, 'base64');
}

const image = (r: Result) => Buffer.from(r.base64_image ?? '', 'base64');
/** Screen coordinates of the centre of a page box. */
const center = (b: { x: number; y: number; w: number; h: number }) => [
  origin.x + Math.round(b.x + b.w / 2),
  origin.y + Math.round(b.y + b.h / 2),
];

describe('computer actions on an ubuntu instance', () => {
  it('screenshot is a PNG of the whole display; the desktop is blank before a browser starts', async () => {
    const png = await screenshot();
    expect(pngSize(png)).toEqual([1024, 768]);
    const img = decodePng(png);
    expect(findColor(img, GO_COLOR)).toBeUndefined();
  });

  it('browser/start shows a headful Chromium on the display, reachable over cdp_url', async () => {
    const res = await server.api(`/v1/instance/${id}/browser/start`, { method: 'POST' });
    expect(res.status).toBe(200);
    const { cdp_url } = (await res.json()) as { cdp_url: string };
    expect(cdp_url).toMatch(new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/cdp/${id}/devtools/browser/`));
    page = await PageProbe.open(cdp_url, site.url);
    const current = await server.api(`/v1/instance/${id}/browser/current_url`);
    expect(await current.json()).toEqual({ current_url: site.url });

    // find the page on screen from pixels alone
    let go: ReturnType<typeof findColor>;
    await eventually(
      async () => (go = findColor(decodePng(await screenshot()), GO_COLOR)) !== undefined,
      'the playground to appear on the display',
    );
    expect(go).toMatchObject({ w: LAYOUT.go.w, h: LAYOUT.go.h });
    origin = { x: go!.x - LAYOUT.go.x, y: go!.y - LAYOUT.go.y };
    expect(origin.y).toBeGreaterThan(0); // below the browser's own toolbar
    const pad = findColor(decodePng(await screenshot()), PAD_COLOR);
    expect(pad).toEqual({ ...LAYOUT.pad, x: origin.x + LAYOUT.pad.x, y: origin.y + LAYOUT.pad.y });
  });

  it('clicks the button by coordinates; the screenshot after it shows the change', async () => {
    const before = await computer({ action: 'take_screenshot' });
    expect(pngSize(image(before))).toEqual([1024, 768]);
    const after = await computer({
      action: 'click_mouse',
      button: 'left',
      coordinates: center(LAYOUT.go),
    });
    expect(after.error).toBeUndefined();
    await eventually(async () => (await page.state()).clicks === 1, 'the click to reach the page');
    expect(after.base64_image).not.toBe(before.base64_image);
    expect(findColor(decodePng(image(after)), GO_COLOR)).toBeUndefined();
  });

  it('types into a field, with chords and hold_keys', async () => {
    await computer({
      action: 'click_mouse',
      button: 'left',
      coordinates: center(LAYOUT.field),
      screenshot: false,
    });
    await computer({ action: 'type_text', text: 'héllo wörld — “ok” 😀', screenshot: false });
    await eventually(
      async () => (await page.state()).value === 'héllo wörld — “ok” 😀',
      'the text in the field',
    );
    await computer({ action: 'press_key', keys: ['ctrl', 'a'], screenshot: false });
    await computer({ action: 'type_text', text: 'abc', hold_keys: ['shift'], screenshot: false });
    await eventually(
      async () => (await page.state()).value === 'ABC',
      'shifted text replacing the selection',
    );
    await computer({ action: 'press_key', keys: ['ctrl+a'], screenshot: false });
    await computer({ action: 'press_key', keys: ['backspace'], screenshot: false });
    await computer({ action: 'press_key', keys: ['x'], duration: 0.1, screenshot: false });
    await computer({ action: 'press_key', keys: ['Return'], screenshot: false });
    await eventually(async () => (await page.state()).value === 'x', 'the field to hold x');
    expect((await page.state()).keys).toEqual(
      expect.arrayContaining(['C-a', 'S-A', 'Backspace', 'x', 'Enter']),
    );
  });

  it('clicks with hold_keys and releases them afterwards', async () => {
    await computer({
      action: 'click_mouse',
      button: 'left',
      coordinates: center(LAYOUT.go),
      hold_keys: ['ctrl'],
      screenshot: false,
    });
    await eventually(async () => (await page.state()).ctrlClicks === 1, 'a ctrl-click');
    await computer({ action: 'click_mouse', button: 'left', num_clicks: 2, screenshot: false });
    await computer({ action: 'click_mouse', button: 'right', screenshot: false });
    await eventually(async () => {
      const s = await page.state();
      return s.dblclicks === 1 && s.rightClicks === 1 && s.ctrlClicks === 1;
    }, 'a double and a right click without ctrl');
  });

  it('drags along a path', async () => {
    const [x, y] = [origin.x + LAYOUT.pad.x, origin.y + LAYOUT.pad.y];
    const path = [
      [x + 10, y + 10],
      [x + 60, y + 40],
      [x + 120, y + 90],
      [x + 200, y + 150],
    ];
    await computer({ action: 'drag_mouse', path, screenshot: false });
    await eventually(
      async () => (await page.state()).drag.length >= 2,
      'the drag to reach the page',
    );
    const { drag } = await page.state();
    const toPage = ([px, py]: number[]) => [px! - origin.x, py! - origin.y];
    expect(drag[0]).toEqual(toPage(path[0]!));
    expect(drag.at(-1)).toEqual(toPage(path.at(-1)!));
  });

  it('moves the mouse, reports and clamps the position', async () => {
    await computer({ action: 'move_mouse', coordinates: [123, 45], screenshot: false });
    expect((await computer({ action: 'get_cursor_position', screenshot: false })).output).toBe(
      'X=123,Y=45',
    );
    await computer({ action: 'move_mouse', coordinates: [5000, -20], screenshot: false });
    expect((await computer({ action: 'get_cursor_position', screenshot: false })).output).toBe(
      'X=1023,Y=0',
    );
  });

  it('scrolls in wheel notches', async () => {
    await computer({
      action: 'scroll',
      coordinates: [origin.x + 500, origin.y + 400],
      delta_y: 3,
      screenshot: false,
    });
    await eventually(async () => (await page.state()).scrollY > 0, 'the page to scroll down');
    await computer({ action: 'scroll', delta_y: -10, screenshot: false });
    await eventually(async () => (await page.state()).scrollY === 0, 'the page to scroll back up');
  });

  it('reports an unknown key as a tool error', async () => {
    const r = await computer({ action: 'press_key', keys: ['nosuchkey'], screenshot: false });
    expect(r.error).toMatch(/Unknown key name 'nosuchkey'/);
  });

  it('browser/stop closes the desktop browser; stop leaves no Xvfb, x11vnc or Chromium', async () => {
    const url = await server.api(`/v1/instance/${id}/stream_url`); // starts x11vnc
    expect(url.status).toBe(200);
    // the instance's processes are its cgroup's members (and the host-side wrappers naming it)
    const tree = processTree(instancePids(id));
    const names = new Set(tree.map(commName));
    expect(names).toContain('Xvfb');
    expect(names).toContain('x11vnc');
    expect([...names].some((n) => n.startsWith('chromium'))).toBe(true);

    const bstop = await server.api(`/v1/instance/${id}/browser/stop`, { method: 'POST' });
    expect(bstop.status).toBe(200);
    await eventually(
      () => !processTree(instancePids(id)).some((p) => commName(p).startsWith('chromium')),
      'the desktop browser to exit',
    );
    const shot = decodePng(await screenshot());
    expect(findColor(shot, GO_COLOR)).toBeUndefined();

    const stop = await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    expect(stop.status).toBe(200);
    await eventually(() => tree.every((p) => !alive(p)), 'every process of the instance to exit');
    // the stop answers at once and tears down in the background: nothing of it may remain
    await eventually(() => instancePids(id).length === 0, 'no process of the instance left');
  });
});
