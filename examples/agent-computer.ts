/**
 * A computer-use agent loop that works only from screenshots and computer actions — no DOM, no
 * selectors. The goal: on a page it has never seen, find the text field (magenta border) and the
 * button (orange), both placed at random, type a word into the field, press the button, and
 * check from the screen that the page answered with its green "done" banner.
 *
 * The page is served by this script on 127.0.0.1, so the instance's browser must run on this
 * machine: the embedded server (no `BURROW_BASE_URL`) or a burrow server on localhost.
 *
 * `npm run build && node --import tsx examples/agent-computer.ts`
 */
import { inflateSync } from 'node:zlib';
import { openSession, type ComputerAction, type ToolResult } from 'burrow-sandbox';
import { serve } from './local-site.js';

type Rgb = readonly [number, number, number];
type Box = { x: number; y: number; w: number; h: number };

const FIELD: Rgb = [255, 0, 255];
const BUTTON: Rgb = [255, 140, 0];
const DONE: Rgb = [0, 170, 80];
const WORD = 'burrow';

// --- The page: a field, a button and a banner, somewhere -------------------------------------

function page(): string {
  // somewhere in a column of the viewport: the field on the left, the button on the right
  const at = (left: number, w: number, h: number) => {
    const x = left + Math.floor(Math.random() * (440 - w));
    const y = 40 + Math.floor(Math.random() * (560 - h));
    return `position:absolute;left:${x}px;top:${y}px;width:${w}px;height:${h}px;box-sizing:border-box`;
  };
  return `<!doctype html><html><head><meta charset="utf-8"><title>A form</title></head>
<body style="margin:0;background:#fafafa;font:18px sans-serif">
  <input id="word" style="${at(40, 280, 44)};border:6px solid rgb(${FIELD})">
  <button id="go" style="${at(520, 140, 56)};border:0;background:rgb(${BUTTON});color:#000">Send</button>
  <div id="banner" hidden style="position:fixed;left:0;right:0;bottom:0;height:80px"></div>
  <script>
    document.getElementById('go').onclick = () => {
      const banner = document.getElementById('banner');
      const ok = document.getElementById('word').value === ${JSON.stringify(WORD)};
      banner.style.background = ok ? 'rgb(${DONE})' : 'rgb(200,0,0)';
      banner.hidden = false;
    };
  </script>
</body></html>`;
}

// --- Seeing: decode the screenshot and find colours --------------------------------------------

interface Screen {
  width: number;
  height: number;
  rgb(x: number, y: number): Rgb;
}

/** An 8-bit RGB or RGBA PNG (what the API returns), every filter type. */
function decodePng(png: Buffer): Screen {
  let o = 8;
  let [width, height, channels] = [0, 0, 3];
  const idat: Buffer[] = [];
  while (o < png.length) {
    const len = png.readUInt32BE(o);
    const type = png.toString('latin1', o + 4, o + 8);
    const data = png.subarray(o + 8, o + 8 + len);
    if (type === 'IHDR') {
      [width, height, channels] = [
        data.readUInt32BE(0),
        data.readUInt32BE(4),
        data[9] === 6 ? 4 : 3,
      ];
    } else if (type === 'IDAT') idat.push(data);
    o += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? px[y * stride + i - channels]! : 0;
      const b = y > 0 ? px[(y - 1) * stride + i]! : 0;
      const c = y > 0 && i >= channels ? px[(y - 1) * stride + i - channels]! : 0;
      const p = a + b - c;
      const paeth =
        Math.abs(p - a) <= Math.abs(p - b) && Math.abs(p - a) <= Math.abs(p - c)
          ? a
          : Math.abs(p - b) <= Math.abs(p - c)
            ? b
            : c;
      const pred = [0, a, b, (a + b) >> 1, paeth][filter] ?? 0;
      px[y * stride + i] = (raw[y * (stride + 1) + 1 + i]! + pred) & 0xff;
    }
  }
  return {
    width,
    height,
    rgb: (x, y) => {
      const i = y * stride + x * channels;
      return [px[i]!, px[i + 1]!, px[i + 2]!];
    },
  };
}

/** Bounding box of the pixels within a small tolerance of `color`, if there are enough of them. */
function find(screen: Screen, color: Rgb, minPixels = 200): Box | undefined {
  let [x0, y0, x1, y1, n] = [Infinity, Infinity, -1, -1, 0];
  for (let y = 0; y < screen.height; y++) {
    for (let x = 0; x < screen.width; x++) {
      const [r, g, b] = screen.rgb(x, y);
      if (Math.abs(r - color[0]) + Math.abs(g - color[1]) + Math.abs(b - color[2]) > 24) continue;
      [x0, y0, x1, y1, n] = [
        Math.min(x0, x),
        Math.min(y0, y),
        Math.max(x1, x),
        Math.max(y1, y),
        n + 1,
      ];
    }
  }
  return n >= minPixels ? { x: x0, y: y0, w: x1 - x0 + 1, h: y1 - y0 + 1 } : undefined;
}

const center = (b: Box): [number, number] => [Math.round(b.x + b.w / 2), Math.round(b.y + b.h / 2)];

// --- Acting: observe → decide → act, until the screen says done --------------------------------

await using site = await serve({ '/': page() });

// With no BURROW_BASE_URL, the session runs on an embedded server in this process.
await using session = await openSession({ resolution: [1024, 768] });
await session.page.goto(site.url); // setting the scene: from here on, pixels and input only

const act = (action: ComputerAction): Promise<ToolResult> => session.computer(action);
const look = (result: ToolResult) => decodePng(Buffer.from(result.base64_image ?? '', 'base64'));

let screen = look(await act({ action: 'take_screenshot' }));
let typed = false;
let done = false;
for (let step = 1; step <= 12 && !done; step++) {
  if (find(screen, DONE, 5000)) {
    console.log(`step ${step}: the green banner is on screen — goal reached`);
    done = true;
    continue;
  }
  const field = find(screen, FIELD);
  const button = find(screen, BUTTON);
  let result: ToolResult;
  if (!typed && field) {
    console.log(`step ${step}: field at ${JSON.stringify(field)} — click it, type "${WORD}"`);
    await act({
      action: 'click_mouse',
      button: 'left',
      coordinates: center(field),
      screenshot: false,
    });
    await act({ action: 'press_key', keys: ['ctrl', 'a'], screenshot: false });
    result = await act({ action: 'type_text', text: WORD });
    typed = true;
  } else if (button) {
    console.log(`step ${step}: button at ${JSON.stringify(button)} — click it`);
    result = await act({ action: 'click_mouse', button: 'left', coordinates: center(button) });
  } else {
    console.log(`step ${step}: nothing to act on yet — wait`);
    result = await act({ action: 'wait', duration: 0.5 });
  }
  if (result.error) console.log(`  the action failed: ${result.error}`);
  screen = look(result);
}
if (!done) throw new Error('the agent did not reach its goal in 12 steps');
