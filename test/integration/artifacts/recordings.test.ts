/**
 * Recordings (src/server/artifacts/store.ts, chromium/recorder.ts, ubuntu/desktop/recorder.ts) with
 * real Chromium, Xvfb and Debian's ffmpeg inside real sandboxes: two clips per instance type, a
 * third left running and finalised by the instance's stop, each fetched and checked with ffprobe
 * (H.264, frames, a duration close to the time recorded); one clip at a time; no ffmpeg left once
 * the instance stopped.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APIError, NotFoundError } from '../../../src/client/index.js';
import { eventually, instanceProcesses, pidsMatching } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

let dir = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'burrow-rec-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  expect(instanceProcesses()).toEqual([]);
});
const server = useServer({}, { timeout: 60_000, client: { maxRetries: 0 } });

interface Probe {
  codec: string;
  frames: number;
  duration: number;
  width: number;
  height: number;
}

/** Fetch a clip and read it with ffprobe. */
async function probe(instanceId: string, recordingId: string): Promise<Probe> {
  const res = await server.client.recordings.get(instanceId, recordingId);
  expect(res.headers['content-type']).toBe('video/mp4');
  expect(res.headers['content-disposition']).toContain(`${recordingId}.mp4`);
  const chunks: Buffer[] = [];
  for await (const c of res.body) chunks.push(c as Buffer);
  const file = join(dir, `${recordingId}.mp4`);
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
      'stream=codec_name,nb_read_frames,width,height:format=duration',
      '-of',
      'json',
      file,
    ],
    { encoding: 'utf8' },
  );
  const j = JSON.parse(out) as {
    streams: { codec_name: string; nb_read_frames: string; width: number; height: number }[];
    format: { duration: string };
  };
  const s = j.streams[0]!;
  return {
    codec: s.codec_name,
    frames: Number(s.nb_read_frames),
    duration: Number(j.format.duration),
    width: s.width,
    height: s.height,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Two clips, then a third left running when the instance stops; `act` moves something on screen. */
async function recordThree(id: string, act: (i: number) => Promise<void>) {
  const clips: string[] = [];
  for (let i = 0; i < 2; i++) {
    const { recording_id } = await server.client.recordings.start(id);
    clips.push(recording_id);
    const conflict = await server.client.recordings.start(id).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(APIError);
    expect((conflict as APIError).status).toBe(409);
    await act(i);
    await sleep(1500);
    const clip = await server.client.recordings.stop(id);
    expect(clip).toMatchObject({ id: recording_id, state: 'completed' });
    expect(clip.duration_seconds).toBeGreaterThan(1);
  }
  const { recording_id: last } = await server.client.recordings.start(id);
  clips.push(last);
  await act(2);
  await sleep(1500);
  const running = await server.client.recordings.list(id);
  expect(running.find((r) => r.id === last)?.state).toBe('recording');
  const early = await server.client.recordings.get(id, last).catch((e: unknown) => e);
  expect((early as APIError).status).toBe(409);
  return clips;
}

async function checkAfterStop(id: string, clips: string[], size: [number, number]) {
  await server.client.instances.stop(id);
  const list = await server.client.recordings.list(id);
  expect(list.map((r) => [r.id, r.state])).toEqual(clips.map((c) => [c, 'completed']));
  for (const c of clips) {
    const p = await probe(id, c);
    expect(p.codec).toBe('h264');
    expect([p.width, p.height]).toEqual(size);
    expect(p.duration).toBeGreaterThan(1);
    expect(p.duration).toBeLessThan(30);
    expect(p.frames).toBeGreaterThan(10);
  }
  // every ffmpeg of the instance ended with it (its sandbox wrapper names the instance)
  expect(pidsMatching(`${id} .*/usr/bin/ffmpeg`)).toEqual([]);
}

describe('browser instance', () => {
  it('records the page screencast: two clips and one finalised at stop', async () => {
    const id = (
      await server.client.instances.start({ instance_type: 'browser', resolution: [800, 600] })
    ).id;
    const { cdp_url } = await server.client.browser.cdpUrl(id);
    const browser = await chromium.connectOverCDP(cdp_url);
    const page = browser.contexts()[0]!.pages()[0]!;
    await page.setContent('<h1 id="t">frame</h1>');
    const clips = await recordThree(id, async (i) => {
      await page.evaluate((n) => {
        document.body.style.background = ['#c00', '#0c0', '#00c'][n]!;
      }, i);
    });
    await browser.close();
    await checkAfterStop(id, clips, [800, 600]);
  }, 120_000);

  it('records a page that does not change (one still frame makes a whole clip)', async () => {
    const id = (await server.client.instances.start({ instance_type: 'browser' })).id;
    const { recording_id } = await server.client.recordings.start(id);
    await sleep(1200);
    expect(await server.client.recordings.stop(id)).toMatchObject({ state: 'completed' });
    const p = await probe(id, recording_id);
    expect(p.codec).toBe('h264');
    expect(p.frames).toBeGreaterThan(5);
    await server.client.instances.stop(id);
  }, 60_000);

  it('records while the live view watches, and the live view keeps its frames', async () => {
    const id = (await server.client.instances.start({ instance_type: 'browser' })).id;
    const { cdp_url } = await server.client.browser.cdpUrl(id);
    const browser = await chromium.connectOverCDP(cdp_url);
    const page = browser.contexts()[0]!.pages()[0]!;
    await page.setContent(
      '<p id="t"></p><script>setInterval(() => { t.textContent = Date.now(); }, 30)</script>',
    );
    const { stream_url } = await server.client.instance.streamUrl(id);
    const u = new URL(stream_url);
    const ws = new WebSocket(`ws://${u.host}${u.pathname}ws${u.search}`);
    let frames = 0;
    ws.on('message', (_data, binary) => {
      if (binary) frames++;
    });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    await sleep(1000);
    const before = frames;
    expect(before).toBeGreaterThan(0);
    const { recording_id } = await server.client.recordings.start(id);
    await sleep(2000);
    const during = frames - before;
    await server.client.recordings.stop(id);
    ws.close();
    expect(during).toBeGreaterThan(5);
    const p = await probe(id, recording_id);
    expect(p.frames).toBeGreaterThan(10);
    await browser.close();
    await server.client.instances.stop(id);
  }, 60_000);

  it('refuses recording on an unknown or stopped instance', async () => {
    await expect(server.client.recordings.start('inst_missing')).rejects.toBeInstanceOf(
      NotFoundError,
    );
    const id = (await server.client.instances.start({ instance_type: 'browser' })).id;
    await server.client.instances.stop(id);
    const err = await server.client.recordings.start(id).catch((e: unknown) => e);
    expect((err as APIError).status).toBe(400);
    expect(await server.client.recordings.list(id)).toEqual([]);
  }, 60_000);
});

describe('ubuntu instance', () => {
  it('ends a clip whose ffmpeg the instance killed, and records again', async () => {
    const id = (await server.client.instances.start({ instance_type: 'ubuntu' })).id;
    const { recording_id } = await server.client.recordings.start(id);
    await sleep(500);
    await server.client.instance.bash(id, { command: 'pkill -KILL -f /usr/bin/ffmpeg; true' });
    await eventually(
      async () =>
        (await server.client.recordings.list(id)).find((r) => r.id === recording_id)?.state ===
        'failed',
      'the killed clip reported failed',
    );
    // the listing and the refused fetch both say why there is no clip
    const failed = (await server.client.recordings.list(id)).find((r) => r.id === recording_id);
    expect(failed?.failure_reason).toMatch(/ffmpeg|signal|SIGKILL|exited/i);
    const err = await server.client.recordings.get(id, recording_id).catch((e: unknown) => e);
    expect((err as APIError).status).toBe(409);
    expect((err as APIError).message).toContain(failed!.failure_reason!);
    await server.client.recordings.start(id);
    await sleep(1200);
    expect(await server.client.recordings.stop(id)).toMatchObject({ state: 'completed' });
    await server.client.instances.stop(id);
  }, 60_000);

  it('records the X display: two clips and one finalised at stop', async () => {
    const id = (
      await server.client.instances.start({ instance_type: 'ubuntu', resolution: [800, 600] })
    ).id;
    const clips = await recordThree(id, async (i) => {
      await server.client.instance.computer(id, {
        action: 'move_mouse',
        coordinates: [100 + i * 200, 100 + i * 100],
      });
    });
    await checkAfterStop(id, clips, [800, 600]);
  }, 120_000);
});
