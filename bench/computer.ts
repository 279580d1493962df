/**
 * Computer-action latency and screenshot throughput on both instance types, each next to a
 * baseline measured in the same run:
 *
 * - ubuntu: `click_mouse` through the HTTP API with and without its screenshot, and screenshots
 *   per second, against a bare `xdotool click --delay 0 1` process and ImageMagick's
 *   `import -window root png:-` (when installed), both run on the instance's own display (a
 *   desktop Chromium showing a text page); the server's X11 screenshot path is also timed in
 *   process, without HTTP.
 * - browser: the same operations, against bare CDP commands (`Input.dispatchMouseEvent` press +
 *   release, `Page.captureScreenshot`) sent over the instance's own `cdp_url`.
 *
 * `node --import tsx bench/computer.ts [N]` (default N = 30 clicks per figure).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { CdpConnection } from '../src/server/chromium/cdp.js';
import { startServer } from '../src/server/index.js';
import { connectWithDeadline } from '../src/internal/connect.js';
import { X11Screen } from '../src/server/ubuntu/desktop/x11.js';
import { median, serverApi } from './stats.js';

const N = Number(process.argv[2] ?? 30);
const THROUGHPUT_MS = 3_000;
const RESOLUTION = [1024, 768] as const;
const execFileAsync = promisify(execFile);

const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.95)] ?? NaN;

interface Figure {
  what: string;
  median: number;
  p95: number;
}
async function latency(what: string, n: number, f: () => Promise<unknown>): Promise<Figure> {
  await f(); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await f();
    xs.push(performance.now() - t);
  }
  return { what, median: median(xs), p95: p95(xs) };
}
async function throughput(f: () => Promise<unknown>): Promise<number> {
  await f();
  let n = 0;
  const end = performance.now() + THROUGHPUT_MS;
  const t = performance.now();
  while (performance.now() < end) {
    await f();
    n++;
  }
  return (n * 1000) / (performance.now() - t);
}

function table(title: string, rows: Figure[], baseline: Figure | undefined): void {
  console.log(`\n${title}`);
  for (const r of rows) {
    const ratio = baseline ? `  ×${(r.median / baseline.median).toFixed(1)} baseline` : '';
    console.log(
      `  ${r.what.padEnd(52)} median ${r.median.toFixed(1).padStart(7)} ms   p95 ${r.p95.toFixed(1).padStart(7)} ms${ratio}`,
    );
  }
}
const rate = (what: string, perSecond: number, base?: number) =>
  console.log(
    `  ${what.padEnd(52)} ${perSecond.toFixed(1).padStart(7)} /s${base ? `  (${(perSecond / base).toFixed(2)}× baseline)` : ''}`,
  );

const PAGE = `<!doctype html><body style="margin:0;font:18px sans-serif;background:#f4f4f8">
<h1 style="background:#2a6;color:#fff;margin:0;padding:20px">burrow bench</h1>
${Array.from({ length: 40 }, (_, i) => `<p style="color:hsl(${i * 9},60%,35%)">Line ${i}: the quick brown fox jumps over the lazy dog.</p>`).join('')}
</body>`;

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
  const site = createServer((_q, r) => r.writeHead(200, { 'content-type': 'text/html' }).end(PAGE));
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  const siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;
  const server = await startServer({
    port: 0,
    dataDir: join(work, 'data'),
    apiKey: 'bench-key-0123456789',
    isolation: { allowHostPorts: [(site.address() as AddressInfo).port] },
  });
  const api = serverApi(server);
  const start = async (type: string) =>
    String((await api('/v1/start', { instance_type: type, resolution: RESOLUTION })).id);
  const open = async (cdpUrl: string) => {
    const cdp = await CdpConnection.connect(cdpUrl);
    const { targetInfos } = await cdp.send<{ targetInfos: { targetId: string; type: string }[] }>(
      'Target.getTargets',
    );
    const tab = targetInfos.find((t) => t.type === 'page')!;
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', {
      targetId: tab.targetId,
      flatten: true,
    });
    await cdp.send('Page.navigate', { url: siteUrl }, sessionId);
    await sleep(1000);
    return { cdp, sessionId };
  };
  const click = (id: string, screenshot: boolean) =>
    api(`/v1/instance/${id}/computer`, {
      action: 'click_mouse',
      button: 'left',
      coordinates: [900, 700],
      screenshot,
    });
  const shot = (id: string) => api(`/v1/instance/${id}/screenshot`, {});

  try {
    console.log(
      `burrow computer bench — ${N} clicks per figure, throughput over ${THROUGHPUT_MS / 1000} s, ${RESOLUTION.join('×')}`,
    );

    // ------------------------------------------------------------------ ubuntu
    {
      const id = await start('ubuntu');
      const { cdp_url } = await api(`/v1/instance/${id}/browser/start`, {});
      const page = await open(String(cdp_url));
      // the baselines run on the instance's own display (same pixels, same load): its number
      // from the sandbox, its X authority and socket from the instance directory
      const display = String(
        (await api(`/v1/instance/${id}/bash`, { command: 'echo -n $DISPLAY' })).output,
      );
      const instances = join(work, 'data', 'instances');
      const run = readdirSync(instances).find((d) => existsSync(join(instances, d, id)));
      if (!run) throw new Error('instance directory not found');
      const dir = join(instances, run, id);
      const xauthority = join(dir, 'run', 'Xauthority');
      const env = { PATH: '/usr/bin:/bin', DISPLAY: display, XAUTHORITY: xauthority };
      // the display listens in the instance's own network namespace and /tmp: the bare baseline
      // enters that network namespace directly (as root, no sandbox chain), which is what burrow
      // adds its process start on top of
      const member = readFileSync(
        execFileSync('sh', ['-c', `ls /sys/fs/cgroup/pids/burrow/*.${id}/cgroup.procs`], {
          encoding: 'utf8',
        }).trim(),
        'utf8',
      )
        .split('\n')
        .find(Boolean);
      // `--delay 0`: xdotool otherwise sleeps 100 ms after a click
      const bare = await latency('bare `xdotool mousemove 900 700 click --delay 0 1`', N, () =>
        execFileAsync(
          '/usr/bin/nsenter',
          [
            `--net=/proc/${member}/ns/net`,
            '/usr/bin/xdotool',
            'mousemove',
            '900',
            '700',
            'click',
            '--delay',
            '0',
            '1',
          ],
          { env, timeout: 5000 },
        ),
      );
      const disk = execFileSync('sh', ['-c', `ls -d /var/lib/burrow/sandboxes/*/${id}/disk`], {
        encoding: 'utf8',
      }).trim();
      // the bench's own instance: its socket by host path (the server connects from inside)
      const screen = new X11Screen({
        display,
        xauthority,
        resolution: RESOLUTION,
        connect: (path) =>
          connectWithDeadline({ path: join(disk, path) }, 5000, new Error('connect timed out')),
      });
      const rows = [
        bare,
        await latency('HTTP computer click_mouse, screenshot: false', N, () => click(id, false)),
        await latency('HTTP computer click_mouse (with screenshot)', N, () => click(id, true)),
        await latency('X11 GetImage + PNG encode, in process (no HTTP)', N, () =>
          screen.screenshot(),
        ),
        await latency('HTTP screenshot', N, () => shot(id)),
      ];
      table('ubuntu (xdotool on Xvfb)', rows, bare);
      console.log('  screenshots per second');
      const importRate = existsSync('/usr/bin/import')
        ? await throughput(() =>
            execFileAsync(
              '/usr/bin/nsenter',
              [`--net=/proc/${member}/ns/net`, '/usr/bin/import', '-window', 'root', 'png:-'],
              {
                env,
                encoding: 'buffer',
                timeout: 10_000,
                maxBuffer: 64 << 20,
              },
            ),
          )
        : undefined;
      if (importRate) rate('bare `import -window root png:-` (ImageMagick)', importRate);
      rate(
        'X11 GetImage + PNG encode, in process',
        await throughput(() => screen.screenshot()),
        importRate,
      );
      rate('HTTP screenshot', await throughput(() => shot(id)), importRate);
      screen.close();
      page.cdp.close();
      await api(`/v1/instance/${id}/stop`, {});
    }

    // ------------------------------------------------------------------ browser
    {
      const id = await start('browser');
      const { cdp_url } = await api(`/v1/instance/${id}/browser/cdp_url`);
      const { cdp, sessionId } = await open(String(cdp_url));
      const mouse = (type: string) =>
        cdp.send(
          'Input.dispatchMouseEvent',
          {
            type,
            x: 900,
            y: 700,
            button: 'left',
            buttons: type === 'mousePressed' ? 1 : 0,
            clickCount: 1,
          },
          sessionId,
        );
      const bare = await latency('bare CDP press + release (over cdp_url)', N, async () => {
        await mouse('mousePressed');
        await mouse('mouseReleased');
      });
      // what click_mouse with coordinates sends: Chromium delivers a mouseMoved with the next
      // frame, so the move is what takes a frame (16.7 ms at 60 Hz), bare or not
      let nudge = 0;
      const bareClick = await latency(
        'bare CDP move + press + release (over cdp_url)',
        N,
        async () => {
          nudge ^= 1; // a move to where the pointer is already would be dropped
          await cdp.send(
            'Input.dispatchMouseEvent',
            { type: 'mouseMoved', x: 900 + nudge, y: 700, button: 'none', buttons: 0 },
            sessionId,
          );
          await mouse('mousePressed');
          await mouse('mouseReleased');
        },
      );
      const capture = () => cdp.send('Page.captureScreenshot', { format: 'png' }, sessionId);
      const bareShot = await latency('bare CDP Page.captureScreenshot (over cdp_url)', N, capture);
      const rows = [
        bare,
        bareClick,
        await latency('HTTP computer click_mouse, screenshot: false', N, () => click(id, false)),
        await latency('HTTP computer click_mouse (with screenshot)', N, () => click(id, true)),
        bareShot,
        await latency('HTTP screenshot', N, () => shot(id)),
      ];
      table('browser (CDP Input.*)', rows, bare);
      console.log('  screenshots per second');
      const bareRate = await throughput(capture);
      rate('bare CDP Page.captureScreenshot', bareRate);
      rate('HTTP screenshot', await throughput(() => shot(id)), bareRate);
      cdp.close();
      await api(`/v1/instance/${id}/stop`, {});
    }
  } finally {
    await server.close();
    site.closeAllConnections();
    site.close();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
