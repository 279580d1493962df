/**
 * What a recording costs. `node --import tsx bench/recording.ts [N]` (default 5), on one server
 * started here (the server runs in this process):
 *
 *   cpu      for each instance type, with an animated page on screen (the browser instance's page;
 *            the ubuntu desktop browser's window), CPU used over a 5 s window with no recording
 *            and then with one running: the instance's processes (its cgroup: Chromium, Xvfb,
 *            ffmpeg …, from /proc; ffmpeg's share printed apart) plus this process (the server,
 *            which relays the screencast frames to ffmpeg), in cores; and the frames per second
 *            of the clip (ffprobe's frame count over its duration; the target is 15)
 *   session  openSession() → page.goto() → dispose, N times, interleaved with the same plus
 *            recording.start() after opening and recording.stop() before disposing
 *
 * It prints the figures and the ratios recording on ÷ off.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { Burrow, openSession } from 'burrow-sandbox';
import { startServer } from 'burrow-sandbox/server';
import { median } from './stats.js';

const n = Number(process.argv[2] ?? 5);
if (!Number.isInteger(n) || n < 1) throw new Error('usage: bench/recording.ts [N ≥ 1]');
const WINDOW_MS = 5_000;

const dataDir = mkdtempSync(join(tmpdir(), 'brec-'));
process.env.BURROW_DATA_DIR = dataDir;
delete process.env.BURROW_BASE_URL;

// a page that repaints all the time, so the screencast has frames to send
const animated = `<!doctype html><title>bench</title><style>
  body { margin: 0; background: #222; }
  .box { width: 300px; height: 300px; margin: 100px; background: linear-gradient(#f80, #08f);
         animation: spin 2s linear infinite; }
  @keyframes spin { to { transform: rotate(360deg); } }
</style><div class="box"></div><p id="t" style="color:#fff"></p>
<script>setInterval(() => { document.getElementById('t').textContent = Date.now(); }, 50);</script>`;
const site = createServer((_req, res) =>
  res.writeHead(200, { 'content-type': 'text/html' }).end(animated),
);
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const pageUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;

const server = await startServer({
  port: 0,
  dataDir: join(dataDir, 'srv'),
  isolation: { allowHostLoopback: true },
  artifactRetentionSeconds: 600,
});
const client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey });
const ticks = 100; // getconf CLK_TCK on Linux

/** CPU seconds used so far by instance `id`'s processes (its cgroup's members, from /proc). */
function instanceCpu(id: string): Map<number, { cpu: number; ffmpeg: boolean }> {
  const out = new Map<number, { cpu: number; ffmpeg: boolean }>();
  let pids: number[] = [];
  try {
    pids = execFileSync('sh', ['-c', `cat /sys/fs/cgroup/pids/burrow/*.${id}/cgroup.procs`], {
      encoding: 'utf8',
    })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    /* no cgroups: unisolated server */
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const cpu = (Number(fields[11]) + Number(fields[12])) / ticks;
      out.set(pid, { cpu, ffmpeg: comm === 'ffmpeg' });
    } catch {
      /* exited */
    }
  }
  return out;
}

type Cores = { instance: number; ffmpeg: number; server: number };

/** Cores used over `ms` by the instance (ffmpeg's share apart) and this process. */
async function cores(id: string, ms: number): Promise<Cores> {
  const before = instanceCpu(id);
  const self = process.cpuUsage();
  await sleep(ms);
  const after = instanceCpu(id);
  const selfUsed = process.cpuUsage(self);
  let used = 0;
  let ffmpeg = 0;
  for (const [pid, t] of after) {
    const d = t.cpu - (before.get(pid)?.cpu ?? 0);
    used += d;
    if (t.ffmpeg) ffmpeg += d;
  }
  const s = ms / 1000;
  return {
    instance: used / s,
    ffmpeg: ffmpeg / s,
    server: (selfUsed.user + selfUsed.system) / 1e6 / s,
  };
}

/** Frames per second of clip `recordingId`, from ffprobe. */
async function clipFps(id: string, recordingId: string): Promise<{ fps: number; seconds: number }> {
  const res = await client.recordings.get(id, recordingId);
  const chunks: Buffer[] = [];
  for await (const c of res.body) chunks.push(c as Buffer);
  const file = join(dataDir, `${recordingId}.mp4`);
  writeFileSync(file, Buffer.concat(chunks));
  const out = execFileSync(
    '/usr/bin/ffprobe',
    [
      '-v',
      'error',
      '-count_frames',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=nb_read_frames:format=duration',
      '-of',
      'json',
      file,
    ],
    { encoding: 'utf8' },
  );
  const j = JSON.parse(out) as {
    streams: { nb_read_frames: string }[];
    format: { duration: string };
  };
  const seconds = Number(j.format.duration);
  return { fps: Number(j.streams[0]!.nb_read_frames) / seconds, seconds };
}

const fmt = (x: number, d = 2) => x.toFixed(d);

async function cpuOf(type: 'browser' | 'ubuntu'): Promise<void> {
  const { id } = await client.instances.start({ instance_type: type });
  const { cdp_url } =
    type === 'browser' ? await client.browser.cdpUrl(id) : await client.browser.start(id);
  const browser = await chromium.connectOverCDP(cdp_url);
  try {
    const page = browser.contexts()[0]!.pages()[0]!;
    await page.goto(pageUrl);
    await sleep(1000);
    const off = await cores(id, WINDOW_MS);
    const { recording_id } = await client.recordings.start(id);
    await sleep(500);
    const on = await cores(id, WINDOW_MS);
    await client.recordings.stop(id);
    const clip = await clipFps(id, recording_id);
    const total = (c: Cores) => c.instance + c.server;
    console.log(
      `${type.padEnd(8)} cpu off ${fmt(total(off))} cores (instance ${fmt(off.instance)} + server ${fmt(off.server)})` +
        ` | on ${fmt(total(on))} cores (instance ${fmt(on.instance)}, ffmpeg ${fmt(on.ffmpeg)} of it, + server ${fmt(on.server)})` +
        ` | +${fmt(total(on) - total(off))} cores, on ÷ off ${fmt(total(on) / Math.max(total(off), 0.01))}` +
        ` | clip ${fmt(clip.fps, 1)} fps over ${fmt(clip.seconds, 1)} s`,
    );
  } finally {
    await browser.close();
    await client.instances.stop(id);
  }
}

try {
  console.log(`recording cost (window ${WINDOW_MS / 1000} s, animated page, target 15 fps)`);
  await cpuOf('browser');
  await cpuOf('ubuntu');

  const remote = { baseUrl: server.url, apiKey: server.apiKey };
  const runs = {
    off: async () => {
      await using session = await openSession(remote);
      await session.page.goto(pageUrl);
    },
    on: async () => {
      await using session = await openSession(remote);
      await session.recording.start();
      await session.page.goto(pageUrl);
      await session.recording.stop();
    },
  };
  await runs.off(); // warm-up, untimed
  const times: Record<keyof typeof runs, number[]> = { off: [], on: [] };
  for (let i = 0; i < n; i++) {
    for (const k of ['off', 'on'] as const) {
      const t0 = performance.now();
      await runs[k]();
      times[k].push(performance.now() - t0);
    }
  }
  const off = median(times.off);
  const on = median(times.on);
  console.log(
    `session open → goto → dispose, median of ${n}: recording off ${fmt(off, 0)} ms, ` +
      `on (start after open, stop before dispose) ${fmt(on, 0)} ms, on ÷ off ${fmt(on / off)}`,
  );
} finally {
  await client.close();
  await server.close();
  site.close();
  rmSync(dataDir, { recursive: true, force: true });
}
