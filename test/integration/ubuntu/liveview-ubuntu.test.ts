/**
 * The live view of an ubuntu instance (`stream_url`): x11vnc started on demand, bridged to a
 * WebSocket behind the instance token, and the noVNC page served by the server, opened in a real
 * headless browser. It shows the desktop, a click through it reaches the desktop browser's page,
 * wrong or expired tokens are refused, and x11vnc goes away with the instance.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handshakeStatus } from '../../helpers/handshake.js';
import { rawRequest } from '../../helpers/raw-http.js';
import {
  eventually,
  instancePids,
  instanceProcesses,
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
  PageProbe,
  processTree,
  startPlayground,
  type Playground,
} from '../../helpers/computer.js';

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

let server: TestServer;
let site: Playground;
let viewer: Browser;

beforeAll(async () => {
  [server, site, viewer] = await Promise.all([
    testServer(),
    startPlayground(),
    chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: CHROMIUM_ARGS }),
  ]);
});
afterAll(async () => {
  await viewer?.close();
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

async function startUbuntu(): Promise<string> {
  const res = await server.api('/v1/start', {
    json: { instance_type: 'ubuntu', resolution: [1024, 768] },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

async function streamUrl(id: string): Promise<string> {
  const res = await server.api(`/v1/instance/${id}/stream_url`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { stream_url: string }).stream_url;
}

const cmdline = (pid: string) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};

/** x11vnc runs inside the instance: among its cgroup's members (and their children). */
const x11vnc = (id: string) =>
  processTree(instancePids(id)).filter((p) => commName(p) === 'x11vnc');

describe('ubuntu instance live view', () => {
  it('shows the desktop in noVNC and a click through it reaches the desktop browser', async () => {
    const id = await startUbuntu();
    expect(x11vnc(id)).toEqual([]); // started lazily
    const start = await server.api(`/v1/instance/${id}/browser/start`, { method: 'POST' });
    const { cdp_url } = (await start.json()) as { cdp_url: string };
    const page = await PageProbe.open(cdp_url, site.url);

    // where the button is on the desktop, from a screenshot
    let go: ReturnType<typeof findColor>;
    await eventually(async () => {
      const res = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
      const png = Buffer.from(
        ((await res.json()) as { base64_image: string }).base64_image,
        'base64',
      );
      return (go = findColor(decodePng(png), GO_COLOR)) !== undefined;
    }, 'the playground on the desktop');

    const url = await streamUrl(id);
    expect(url).toMatch(new RegExp(`^${server.url}/stream/${id}/\\?token=[\\w-]+$`));
    expect(x11vnc(id).length).toBe(1);

    const tab = await viewer.newPage({ viewport: { width: 1024, height: 768 } });
    const failed: string[] = [];
    tab.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    await tab.goto(url);
    await tab.waitForSelector('body[data-connected="true"]', { timeout: 20_000 });
    expect(failed).toEqual([]); // every noVNC module came with the token
    // the page knows the VNC password (it just logged in with it); no command line on the host
    // does (every user reads /proc/N/cmdline)
    const password = /"password":"([^"]+)"/.exec(await (await fetch(url)).text())?.[1];
    expect(password).toMatch(/^[\w-]{8}$/);
    expect(
      readdirSync('/proc')
        .filter((n) => /^\d+$/.test(n))
        .filter((n) => cmdline(n).includes(password!))
        .map((n) => `${n}: ${cmdline(n)}`),
    ).toEqual([]);

    const canvas = tab.locator('#screen canvas');
    await eventually(
      async () =>
        (await canvas.evaluate((c: HTMLCanvasElement) => {
          const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
          let green = 0;
          for (let i = 0; i < d.length; i += 4) {
            if (d[i]! < 40 && d[i + 1]! > 120 && d[i + 1]! < 200 && d[i + 2]! < 40) green++;
          }
          return c.width === 1024 && c.height === 768 && green > 0;
        })) === true,
      'the desktop, with the button, in the viewer canvas',
    );

    // desktop pixel → viewer pixel (noVNC scales the canvas to the viewport)
    const box = (await canvas.boundingBox())!;
    const at = (x: number, y: number) =>
      [box.x + (x * box.width) / 1024, box.y + (y * box.height) / 768] as const;
    await tab.mouse.click(...at(go!.x + go!.w / 2, go!.y + go!.h / 2));
    await eventually(async () => (await page.state()).clicks === 1, 'the click to reach the page');

    const field = at(
      go!.x - LAYOUT.go.x + LAYOUT.field.x + 40,
      go!.y - LAYOUT.go.y + LAYOUT.field.y + 15,
    );
    await tab.mouse.click(...field);
    await tab.keyboard.type('via VNC');
    await eventually(
      async () => (await page.state()).value === 'via VNC',
      'typed text in the field',
    );

    await tab.close();
    page.close();
    const tree = processTree(instancePids(id));
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    await eventually(() => tree.every((p) => !alive(p)), 'every process of the instance to exit');
    expect(x11vnc(id)).toEqual([]);
  });

  it('refuses a wrong token, and the token dies with the instance', async () => {
    const id = await startUbuntu();
    const url = new URL(await streamUrl(id));
    const token = url.searchParams.get('token')!;
    const ws = `ws://${url.host}/stream/${id}/websockify`;
    const asset = `${url.origin}/stream/${id}/novnc/core/rfb.js`;

    expect((await fetch(`${url.origin}${url.pathname}?token=wrong`)).status).toBe(401);
    expect((await fetch(asset)).status).toBe(401);
    expect((await fetch(`${asset}?token=${token}`)).status).toBe(200);
    // raw paths, so the server itself receives the `..` (fetch would resolve it first); a .js
    // file under core/ as far as the module pattern can tell, in fact another package's
    for (const up of [
      '../package.json',
      '%2e%2e/package.json',
      'core/../../../ws/index.js',
      'core/%2e%2e/%2e%2e/%2e%2e/ws/index.js',
      'core/..%2f..%2f..%2fws%2findex.js',
      'core/%2E%2E%2F%2E%2E%2F%2E%2E%2Fws%2Findex.js',
    ]) {
      const res = await rawRequest(url.origin, `/stream/${id}/novnc/${up}?token=${token}`);
      expect(res.status, up).toBe(404);
    }
    expect(await handshakeStatus(`${ws}?token=wrong`, { protocols: ['binary'] })).toBe(401);
    expect(await handshakeStatus(`${ws}?token=${token}`, { protocols: ['binary'] })).toBe(101);

    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    expect((await fetch(url)).status).toBeGreaterThanOrEqual(400);
    expect(
      await handshakeStatus(`${ws}?token=${token}`, { protocols: ['binary'] }),
    ).toBeGreaterThanOrEqual(400);
    await eventually(() => instancePids(id).length === 0, 'the instance processes to exit');
  });
});
