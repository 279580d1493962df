/**
 * Shared by the computer-* and liveview-* integration tests: a playground page on 127.0.0.1,
 * a CDP view of an instance's page (to check what the page saw), a PNG decoder to find things
 * on screenshots by colour, and process-tree bookkeeping for the no-leak checks.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodePngSync } from '../../src/internal/png.js';
import { CdpConnection } from '../../src/server/chromium/cdp.js';

/** Colours of the playground's targets, `[r, g, b]`, distinct from everything else on screen. */
export const GO_COLOR = [0, 160, 0] as const;
export const PAD_COLOR = [0, 0, 200] as const;

/** Page coordinates (CSS pixels) of the playground's elements. */
export const LAYOUT = {
  go: { x: 40, y: 40, w: 160, h: 60 },
  field: { x: 40, y: 140, w: 300, h: 30 },
  pad: { x: 400, y: 40, w: 300, h: 200 },
} as const;

/** What the playground saw; read with `state()`. */
export interface PlaygroundState {
  clicks: number;
  shiftClicks: number;
  ctrlClicks: number;
  dblclicks: number;
  rightClicks: number;
  drag: [number, number][];
  keys: string[];
  value: string;
  scrollY: number;
}

const box = (b: { x: number; y: number; w: number; h: number }) =>
  `position:absolute;left:${b.x}px;top:${b.y}px;width:${b.w}px;height:${b.h}px;box-sizing:border-box`;

const PLAYGROUND = `<!doctype html>
<html><head><title>playground</title><meta charset="utf-8"></head>
<body style="margin:0;background:#fff;font:16px sans-serif">
<button id="go" style="${box(LAYOUT.go)};background:rgb(${GO_COLOR});border:0;color:#fff">Go</button>
<input id="field" style="${box(LAYOUT.field)}">
<div id="pad" style="${box(LAYOUT.pad)};background:rgb(${PAD_COLOR})"></div>
<div style="height:5000px"></div>
<script>
  const s = (window.state = { clicks: 0, shiftClicks: 0, ctrlClicks: 0, dblclicks: 0, rightClicks: 0, drag: [], keys: [] });
  const go = document.getElementById('go');
  go.addEventListener('click', (e) => {
    s.clicks++;
    if (e.shiftKey) s.shiftClicks++;
    if (e.ctrlKey) s.ctrlClicks++;
    go.style.background = 'rgb(' + (s.clicks * 40 % 256) + ',0,' + (s.clicks * 90 % 256) + ')';
    go.textContent = 'Clicked ' + s.clicks;
  });
  go.addEventListener('dblclick', () => s.dblclicks++);
  go.addEventListener('contextmenu', (e) => { e.preventDefault(); s.rightClicks++; });
  const pad = document.getElementById('pad');
  pad.addEventListener('pointerdown', (e) => { s.drag = [[e.clientX, e.clientY]]; pad.setPointerCapture(e.pointerId); });
  pad.addEventListener('pointermove', (e) => { if (e.buttons & 1) s.drag.push([e.clientX, e.clientY]); });
  pad.addEventListener('pointerup', (e) => s.drag.push([e.clientX, e.clientY]));
  document.addEventListener('keydown', (e) => {
    const mods = (e.ctrlKey ? 'C' : '') + (e.shiftKey ? 'S' : '') + (e.altKey ? 'A' : '') + (e.metaKey ? 'M' : '');
    s.keys.push(mods ? mods + '-' + e.key : e.key);
  });
</script>
</body></html>`;

export interface Playground {
  /** `http://127.0.0.1:<port>/` */
  url: string;
  close(): Promise<void>;
}

export async function startPlayground(): Promise<Playground> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(PLAYGROUND);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A page of an instance's browser, seen over its `cdp_url`. */
export class PageProbe {
  private constructor(
    readonly cdp: CdpConnection,
    readonly sessionId: string,
  ) {}

  /** Attach to the first tab of the browser behind `cdpUrl` and load `url` in it. */
  static async open(cdpUrl: string, url: string): Promise<PageProbe> {
    const cdp = await CdpConnection.connect(cdpUrl);
    const { targetInfos } = await cdp.send<{ targetInfos: { targetId: string; type: string }[] }>(
      'Target.getTargets',
    );
    const tab = targetInfos.find((t) => t.type === 'page');
    if (!tab) throw new Error('the browser has no tab');
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', {
      targetId: tab.targetId,
      flatten: true,
    });
    const probe = new PageProbe(cdp, sessionId);
    await probe.load(url);
    return probe;
  }

  async eval<T>(expression: string): Promise<T> {
    const r = await this.cdp.send<{ result: { value: T }; exceptionDetails?: unknown }>(
      'Runtime.evaluate',
      { expression, returnByValue: true, awaitPromise: true },
      this.sessionId,
    );
    if (r.exceptionDetails)
      throw new Error(`evaluation failed: ${JSON.stringify(r.exceptionDetails)}`);
    return r.result.value;
  }

  /**
   * Navigate and wait for the playground to be ready. Retries: Chromium's network service can
   * restart right after launch and drop a navigation.
   */
  async load(url: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      await this.cdp.send('Page.navigate', { url }, this.sessionId).catch(() => undefined);
      const end = Date.now() + 5_000;
      while (Date.now() < end) {
        const ready = await this.eval<boolean>(
          `location.href === ${JSON.stringify(url)} && document.readyState === 'complete' && !!window.state`,
        ).catch(() => false);
        if (ready) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      if (attempt >= 2) throw new Error(`could not load ${url}`);
    }
  }

  state(): Promise<PlaygroundState> {
    return this.eval<PlaygroundState>(
      `({ ...window.state, value: document.getElementById('field').value, scrollY: window.scrollY })`,
    );
  }

  close(): void {
    this.cdp.close();
  }
}

/** A decoded PNG, read as RGB. */
export interface Image {
  width: number;
  height: number;
  /** `[r, g, b]` at a pixel. */
  at(x: number, y: number): [number, number, number];
}

/** `png` decoded by src/internal/png.ts, with an RGB reader (grey spread, alpha ignored). */
export function decodePng(png: Buffer): Image {
  const { width, height, channels, pixels } = decodePngSync(png);
  return {
    width,
    height,
    at: (x, y) => {
      const i = (y * width + x) * channels;
      return channels >= 3
        ? [pixels[i]!, pixels[i + 1]!, pixels[i + 2]!]
        : [pixels[i]!, pixels[i]!, pixels[i]!];
    },
  };
}

/** Bounding box of the pixels of exactly `color`, or undefined when there are none. */
export function findColor(
  img: Image,
  color: readonly [number, number, number],
): { x: number; y: number; w: number; h: number } | undefined {
  let [x0, y0, x1, y1] = [Infinity, Infinity, -1, -1];
  for (let y = 0; y < img.height; y++) {
    for (let x = 0; x < img.width; x++) {
      const [r, g, b] = img.at(x, y);
      if (r === color[0] && g === color[1] && b === color[2]) {
        x0 = Math.min(x0, x);
        y0 = Math.min(y0, y);
        x1 = Math.max(x1, x);
        y1 = Math.max(y1, y);
      }
    }
  }
  return x1 < 0 ? undefined : { x: x0, y: y0, w: x1 - x0 + 1, h: y1 - y0 + 1 };
}

/** `pids` and all their live descendants. */
export function processTree(pids: number[]): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      /* gone */
    }
  }
  const out = new Set<number>();
  const queue = [...pids];
  while (queue.length > 0) {
    const p = queue.shift()!;
    if (out.has(p)) continue;
    out.add(p);
    queue.push(...(children.get(p) ?? []));
  }
  return [...out];
}

/** Whether `pid` runs (zombies count as gone). */
export { alive } from '../../src/internal/process.js';

/** The command name of `pid` (`Xvfb`, `x11vnc`, `chromium` …), or '' when gone. */
export function commName(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}
