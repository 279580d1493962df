/**
 * Opening an artifact, as the root server does for `GET …/downloads/{id}`, while the instance
 * (which owns its home) tries to make it read something else: the file replaced by a symlink to
 * a host file, the Downloads directory replaced by a symlink, a FIFO (which would block a reader),
 * a directory. Each is refused as "not found", never followed. A real file is served at exactly
 * the size it had when opened. Real files in a temporary home.
 */
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ArtifactStore,
  contentDisposition,
  safeFilename,
  type InstanceArtifacts,
} from '../../src/server/artifacts/store.js';
import { HttpError } from '../../src/server/errors.js';
import type { Logger } from '../../src/server/instances/runtime.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const log = { info() {}, debug() {}, error() {}, warn() {} } as unknown as Logger;

async function setup(): Promise<{ home: string; base: string; artifacts: InstanceArtifacts }> {
  const base = mkdtempSync(join(tmpdir(), 'burrow-open-'));
  dirs.push(base);
  const home = join(base, 'home');
  mkdirSync(join(home, 'Downloads'), { recursive: true });
  const store = new ArtifactStore({ root: join(base, 'retained'), retentionMs: 60_000, log });
  const artifacts = store.forInstance('inst_1');
  await artifacts.attach({ host: home, inside: '/home/user' });
  return { home, base, artifacts };
}

/** A download the browser reported complete, its file written by `make`. */
function download(artifacts: InstanceArtifacts, home: string, make?: (path: string) => void) {
  const guid = randomUUID();
  make?.(join(home, 'Downloads', guid));
  artifacts.downloadBegan(guid, 'report.pdf');
  artifacts.downloadProgress(guid, 0, 'completed');
  return guid;
}

const read = async (s: Readable) => {
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(c as Buffer);
  return Buffer.concat(parts);
};

/** The details of the refusals seen, in order. */
const details: string[] = [];

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    const opened = (await p) as { stream: Readable };
    opened.stream.destroy();
    return 'opened';
  } catch (err) {
    if (err instanceof HttpError) {
      details.push(err.detail);
      return `${err.status} ${err.code}`;
    }
    throw err;
  }
}

describe('opening a download', () => {
  it('serves a regular file with its name, type and exact size', async () => {
    const { home, artifacts } = await setup();
    const id = download(artifacts, home, (p) => writeFileSync(p, 'hello, file'));
    const opened = await artifacts.open('download', id);
    expect(opened).toMatchObject({
      size: 11,
      filename: 'report.pdf',
      mime_type: 'application/pdf',
    });
    expect((await read(opened.stream)).toString()).toBe('hello, file');
  });

  it('serves the size it had when opened, whatever is appended meanwhile', async () => {
    const { home, artifacts } = await setup();
    const id = download(artifacts, home, (p) => writeFileSync(p, '0123456789'));
    const opened = await artifacts.open('download', id);
    appendFileSync(join(home, 'Downloads', id), 'appended by the instance');
    expect(opened.size).toBe(10);
    expect((await read(opened.stream)).toString()).toBe('0123456789');
  });

  it('serves an empty file as zero bytes', async () => {
    const { home, artifacts } = await setup();
    const id = download(artifacts, home, (p) => writeFileSync(p, ''));
    const opened = await artifacts.open('download', id);
    expect(opened.size).toBe(0);
    expect((await read(opened.stream)).length).toBe(0);
  });

  it('refuses a symlink in place of the file, to a host file or to another download', async () => {
    const { home, base, artifacts } = await setup();
    const secret = join(base, 'host-secret');
    writeFileSync(secret, 'root only');
    const toHost = download(artifacts, home, (p) => symlinkSync(secret, p));
    expect(await refusal(artifacts.open('download', toHost))).toBe('404 download_not_found');
    const real = download(artifacts, home, (p) => writeFileSync(p, 'mine'));
    const toOther = download(artifacts, home, (p) => symlinkSync(join(home, 'Downloads', real), p));
    expect(await refusal(artifacts.open('download', toOther))).toBe('404 download_not_found');
    expect(await refusal(artifacts.open('download', real))).toBe('opened');
  });

  it('refuses the Downloads directory replaced by a symlink to elsewhere', async () => {
    const { home, base, artifacts } = await setup();
    const elsewhere = join(base, 'elsewhere');
    mkdirSync(elsewhere);
    const id = download(artifacts, home);
    writeFileSync(join(elsewhere, id), 'outside the home');
    rmSync(join(home, 'Downloads'), { recursive: true });
    symlinkSync(elsewhere, join(home, 'Downloads'));
    expect(await refusal(artifacts.open('download', id))).toBe('404 download_not_found');
  });

  it('refuses a FIFO at once (never blocks on it) and a directory', async () => {
    const { home, artifacts } = await setup();
    const fifo = download(artifacts, home, (p) => execFileSync('mkfifo', [p]));
    expect(await refusal(artifacts.open('download', fifo))).toBe('404 download_not_found');
    const dir = download(artifacts, home, (p) => mkdirSync(p));
    expect(await refusal(artifacts.open('download', dir))).toBe('404 download_not_found');
    const missing = download(artifacts, home);
    expect(await refusal(artifacts.open('download', missing))).toBe('404 download_not_found');
  });
});

describe('names from a page, as headers and metadata', () => {
  it('trims what a name ends with, and escapes what RFC 5987 does not allow bare', () => {
    expect(safeFilename('report.pdf   ', 'd')).toBe('report.pdf');
    expect(safeFilename('  ..hidden ', 'd')).toBe('hidden');
    expect(contentDisposition("it's (1)*.txt")).toBe(
      `attachment; filename="it's (1)*.txt"; filename*=UTF-8''it%27s%20%281%29%2A.txt`,
    );
  });
});

describe('what cannot be opened yet, or any more', () => {
  it('says which: unknown, of the other kind, in progress, canceled', async () => {
    const { home, artifacts } = await setup();
    const unknown = randomUUID();
    expect(await refusal(artifacts.open('download', unknown))).toBe('404 download_not_found');
    expect(details.at(-1)).toContain(unknown);
    expect(await refusal(artifacts.open('recording', 'rec_0123456789abcdef'))).toBe(
      '404 recording_not_found',
    );
    const done = download(artifacts, home, (p) => writeFileSync(p, 'x'));
    expect(await refusal(artifacts.open('recording', done))).toBe('404 recording_not_found');

    const running = randomUUID();
    writeFileSync(join(home, 'Downloads', running), 'partial');
    artifacts.downloadBegan(running, 'big.iso');
    expect(await refusal(artifacts.open('download', running))).toBe('409 artifact_in_progress');

    const canceled = randomUUID();
    writeFileSync(join(home, 'Downloads', canceled), 'partial');
    artifacts.downloadBegan(canceled, 'big.iso');
    artifacts.downloadProgress(canceled, 7, 'canceled');
    expect(await refusal(artifacts.open('download', canceled))).toBe('409 artifact_unavailable');
    // each names what was asked for
    expect(details.slice(-3)).toEqual([
      expect.stringContaining(done),
      expect.stringContaining(running),
      expect.stringContaining(canceled),
    ]);
    expect(details.at(-1)).toContain('canceled');
  });

  it('a recording still being written is in progress, not unavailable', async () => {
    const { home, artifacts } = await setup();
    mkdirSync(join(home, 'Recordings'));
    artifacts.setRecorder(async () => ({
      stop: async () => ({ ok: true }),
      ended: new Promise(() => {}),
    }));
    const { recording_id: id } = await artifacts.startRecording();
    writeFileSync(join(home, 'Recordings', `${id}.mp4`), 'partial');
    expect(await refusal(artifacts.open('recording', id))).toBe('409 artifact_in_progress');
    expect(details.at(-1)).toContain(id);
    expect(await refusal(artifacts.open('download', id))).toBe('404 download_not_found');
  });

  it('a recording that failed says why it has no file', async () => {
    const { home, artifacts } = await setup();
    mkdirSync(join(home, 'Recordings'));
    artifacts.setRecorder(async () => ({
      stop: async () => ({ ok: false, reason: 'the encoder exited with status 1' }),
      ended: new Promise(() => {}),
    }));
    const { recording_id: id } = await artifacts.startRecording();
    writeFileSync(join(home, 'Recordings', `${id}.mp4`), 'partial');
    await artifacts.stopRecording();
    expect(await refusal(artifacts.open('recording', id))).toBe('409 artifact_unavailable');
    expect(details.at(-1)).toBe(
      `The recording ${id} is failed (the encoder exited with status 1) and has no file`,
    );
  });

  it('before the home is attached, nothing is opened', async () => {
    const base = mkdtempSync(join(tmpdir(), 'burrow-open-'));
    dirs.push(base);
    const store = new ArtifactStore({ root: join(base, 'retained'), retentionMs: 60_000, log });
    const artifacts = store.forInstance('inst_2');
    const id = randomUUID();
    artifacts.downloadBegan(id, 'a.txt');
    artifacts.downloadProgress(id, 1, 'completed');
    expect(await refusal(artifacts.open('download', id))).toBe('404 download_not_found');
  });

  it('ignores a download whose id is not a GUID (it would be joined into a path)', async () => {
    const { home, artifacts } = await setup();
    writeFileSync(join(home, 'secret'), 'x');
    for (const id of ['../secret', 'x', `${randomUUID()}/..`, `../Downloads/${randomUUID()}`]) {
      artifacts.downloadBegan(id, 'a');
      artifacts.downloadProgress(id, 1, 'completed');
      expect(await refusal(artifacts.open('download', id)), id).toBe('404 download_not_found');
    }
  });

  it('after the instance stopped, serves the retained copy; after expiry, nothing', async () => {
    const { home, artifacts } = await setup();
    const id = download(artifacts, home, (p) => writeFileSync(p, 'kept'));
    const link = download(artifacts, home, (p) => symlinkSync('/etc/hostname', p));
    await artifacts.finish();
    rmSync(home, { recursive: true }); // the instance's disk is gone
    const opened = await artifacts.open('download', id);
    expect((await read(opened.stream)).toString()).toBe('kept');
    expect(await refusal(artifacts.open('download', link))).toBe('404 download_not_found');
    await artifacts.expire();
    expect(await refusal(artifacts.open('download', id))).toBe('404 download_not_found');
  });
});
