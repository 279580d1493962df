/**
 * `session.downloads` and `session.recording`: the instance's downloads and screen recordings
 * (burrow extension routes, src/api/artifacts.ts), fetched to the machine running the script.
 * They work while the session is open (it closes its client when it stops). The server keeps the
 * files for its retention time after the instance stopped (default one hour): past `stop()`, fetch
 * them with a client, `burrow.downloads.get(session.id, id)` / `burrow.recordings.get(…)`.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Download, Recording } from '../api/index.js';
import { APIError, type Burrow, type StreamResponse } from '../client/index.js';

export interface SessionDownloads {
  /** Every download the instance's browser made: `id` is Chromium's download GUID. */
  list(): Promise<Download[]>;
  /**
   * Writes download `id` to `path` on this machine (its directory is created), waiting up to
   * `timeoutMs` (default 60 000) for a download still in progress. The file appears complete or
   * not at all.
   */
  save(id: string, path: string, opts?: { timeoutMs?: number }): Promise<void>;
}

export interface SessionRecording {
  /** Starts a clip of the instance's screen (the page's screencast, or the ubuntu display). */
  start(): Promise<{ id: string }>;
  /** Stops the running clip; resolves once the MP4 is finalised. */
  stop(): Promise<Recording>;
  /** Every clip of the instance. */
  list(): Promise<Recording[]>;
  /** Writes clip `id` (MP4, H.264) to `path` on this machine. */
  save(id: string, path: string): Promise<void>;
}

const IN_PROGRESS = 'artifact_in_progress';

export function sessionDownloads(
  client: Burrow,
  instanceId: string,
  ready: (what: string) => void,
): SessionDownloads {
  return {
    list: async () => {
      ready('downloads.list');
      return client.downloads.list(instanceId);
    },
    save: async (id, path, opts = {}) => {
      ready('downloads.save');
      const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
      for (;;) {
        try {
          return await saveTo(await client.downloads.get(instanceId, id), path);
        } catch (err) {
          const busy = err instanceof APIError && err.serverCode === IN_PROGRESS;
          if (!busy || Date.now() > deadline) throw err;
          await sleep(200);
        }
      }
    },
  };
}

export function sessionRecording(
  client: Burrow,
  instanceId: string,
  ready: (what: string) => void,
): SessionRecording {
  return {
    start: async () => {
      ready('recording.start');
      const { recording_id } = await client.recordings.start(instanceId);
      return { id: recording_id };
    },
    stop: async () => {
      ready('recording.stop');
      return client.recordings.stop(instanceId);
    },
    list: async () => {
      ready('recording.list');
      return client.recordings.list(instanceId);
    },
    save: async (id, path) => {
      ready('recording.save');
      await saveTo(await client.recordings.get(instanceId, id), path);
    },
  };
}

/** Stream a response body to a temp file beside `path`, then rename it into place. */
async function saveTo(res: StreamResponse, path: string): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await pipeline(res.body, createWriteStream(tmp, { flags: 'wx', mode: 0o644 }));
    await rename(tmp, path);
  } catch (err) {
    res.body.destroy();
    await rm(tmp, { force: true });
    throw err;
  }
}
