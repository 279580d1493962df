/**
 * `session.downloads` and `session.recording` (src/session/artifacts.ts) against a real server,
 * real Chromium and real ffmpeg: a clip recorded around a download, both saved to this machine
 * (the clip checked with ffprobe), and both still saved after the session was disposed.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { Burrow, openSession, SessionStoppedError } from 'burrow-sandbox';
import { sessionServer } from '../../e2e/fixtures/session-server.js';

const env = sessionServer('bsa-');
const out = mkdtempSync(join(tmpdir(), 'burrow-sa-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const text = `session download ${Date.now()}`;

it('records a clip and keeps a download, both saved here, also after dispose', async () => {
  const session = await openSession(env.remote);
  let downloadId = '';
  try {
    const { id } = await session.recording.start();
    await session.page.setContent(
      `<a id="d" download="notes.txt" href="data:text/plain,${encodeURIComponent(text)}">d</a>`,
    );
    const [download] = await Promise.all([
      session.page.waitForEvent('download'),
      session.page.click('#d'),
    ]);
    expect(download.suggestedFilename()).toBe('notes.txt');
    await new Promise((r) => setTimeout(r, 1500));
    const clip = await session.recording.stop();
    expect(clip).toMatchObject({ id, state: 'completed' });

    const list = await session.downloads.list();
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ filename: 'notes.txt', size: Buffer.byteLength(text) });
    downloadId = list[0]!.id;
    await session.downloads.save(downloadId, join(out, 'live', 'notes.txt'));
    expect(readFileSync(join(out, 'live', 'notes.txt'), 'utf8')).toBe(text);
    expect((await session.recording.list()).map((r) => r.id)).toEqual([id]);
    await session.recording.save(id, join(out, 'live', 'clip.mp4'));
  } finally {
    await session.stop();
  }
  // after dispose the session's own client is closed: a clear error, not a half-written file
  await expect(session.downloads.save(downloadId, join(out, 'x', 'n.txt'))).rejects.toThrow(
    SessionStoppedError,
  );
  // the server keeps them for its retention time: any client fetches them
  const client = new Burrow(env.remote);
  try {
    const res = await client.downloads.get(session.id, downloadId);
    const chunks: Buffer[] = [];
    for await (const c of res.body) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe(text);
  } finally {
    await client.close();
  }
  const video = join(out, 'live', 'clip.mp4');
  const probe = execFileSync(
    '/usr/bin/ffprobe',
    ['-v', 'error', '-show_entries', 'stream=codec_name:format=duration', '-of', 'json', video],
    { encoding: 'utf8' },
  );
  const j = JSON.parse(probe) as {
    streams: { codec_name: string }[];
    format: { duration: string };
  };
  expect(j.streams[0]?.codec_name).toBe('h264');
  expect(Number(j.format.duration)).toBeGreaterThan(1);
  // nothing half-written was left beside the saved files
  expect(readdirSync(join(out, 'live')).sort()).toEqual(['clip.mp4', 'notes.txt']);
  // a clip cannot start on a stopped session
  await expect(session.recording.start()).rejects.toThrow();
}, 120_000);
