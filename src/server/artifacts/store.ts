/**
 * Downloads and recordings of an instance (burrow extension routes, src/server/http/artifact-routes.ts).
 *
 * - While the instance runs, every artifact is a file in the instance's own home, on its disk and
 *   inside its quota: downloads in `~/Downloads/<guid>` (Chromium names them by its download GUID,
 *   `allowAndName`; the page's file name is metadata only and never becomes a path), recordings in
 *   `~/Recordings/<recording id>.mp4` (ffmpeg runs inside the sandbox and writes there).
 * - The instance may do anything in its home, including replacing a file by a link or a FIFO. The
 *   server, which runs as root, opens each file with `O_NOFOLLOW | O_NONBLOCK`, then checks what it
 *   opened: a regular file whose real path (`/proc/self/fd/N`, race-free) is exactly the expected
 *   one under the instance's home. Anything else answers as missing; nothing of the host is read.
 * - When the instance stops, running recordings are finalised first (the runtime calls `finish`
 *   before its sandbox goes), then the finished artifacts are copied, with the same checks, into a
 *   server-only directory of this run (`<run dir>/retained/<instance id>/`). They stay fetchable
 *   there for the retention time (default one hour, `artifactRetentionSeconds` /
 *   `BURROW_ARTIFACT_RETENTION_SECONDS`), then are deleted.
 * - What is copied out costs the host disk, so it is bounded, whatever the instance did to the
 *   files: at most the instance's disk quota per instance, at most `maxRetainedBytes` for every
 *   instance together (default 16 GiB, `BURROW_ARTIFACT_RETAIN_MAX_BYTES`), and never more than a
 *   file really occupies inside: a sparse file (a hole of gigabytes costs nothing inside) is not
 *   kept, and zeros read while copying are written as holes, never as bytes. A file not kept is
 *   logged with the reason and is no longer listed.
 *   Copying out, rather than keeping the instance's disk image mounted, frees the loop device and
 *   everything else on the disk at once and keeps only the artifacts.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readlink, realpath, rm, type FileHandle } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { Readable } from 'node:stream';
import type { Download, Recording, RecordingStartResult } from '../../api/index.js';
import type { Logger } from '../../internal/log.js';
import { HttpError, serverError } from '../errors.js';

/** Default time artifacts stay fetchable after their instance stopped. */
export const DEFAULT_ARTIFACT_RETENTION_MS = 3_600_000;
/** Bound of the retained copy when the instance had no disk quota. */
const DEFAULT_RETAIN_BUDGET = 4 * 1024 ** 3;
/** Default of `ArtifactStoreOptions.maxRetainedBytes`. */
export const DEFAULT_MAX_RETAINED_BYTES = 16 * 1024 ** 3;
/**
 * Bytes by which a file's size may exceed the blocks it occupies before it counts as sparse
 * (a file's last block, ext4's inline data of tiny files).
 */
const SPARSE_SLACK = 1024 * 1024;
/** Unit of the copy: a run of this many zero bytes becomes a hole in the copy. */
const COPY_CHUNK = 64 * 1024;
const ZEROS = Buffer.alloc(COPY_CHUNK);

type DownloadState = Download['state'];
type RecordingState = Recording['state'];

/** The instance's home as the server (host path) and its processes (inside path) see it. */
export interface ArtifactHome {
  host: string;
  inside: string;
  /** Bytes the retained copy may take (the instance's disk quota); default 4 GiB. */
  budget?: number | null | undefined;
}

/** A recording in progress, as an instance type implements it (ffmpeg inside its sandbox). */
export interface ActiveRecording {
  /** Finalise the file (ffmpeg writes its index) and resolve when ffmpeg has exited. */
  stop(): Promise<{ ok: boolean; reason?: string }>;
  /** Settles when ffmpeg exits, also on its own (killed inside the instance, disk full …). */
  readonly ended: Promise<unknown>;
}

/** How an instance type records: start writing a video to `file` (a path inside the instance). */
export type Recorder = (file: string, dir: string) => Promise<ActiveRecording>;

interface Entry {
  id: string;
  kind: 'download' | 'recording';
  /** Path relative to the instance's home (live) or the retained directory (by id). */
  rel: string;
  filename: string;
  mime_type: string;
  created_at: string;
  startedMs: number;
  state: DownloadState | RecordingState;
  /** Bytes known from events (downloads in progress). */
  received: number;
  duration: number | null;
  /** The retained copy's size, once retained. */
  retainedSize?: number;
  /** Why a recording failed. */
  failure?: string;
}

export interface OpenedArtifact {
  stream: Readable;
  size: number;
  filename: string;
  mime_type: string;
}

export interface ArtifactStoreOptions {
  /** Server-only directory for retained artifacts (under this run's directory). */
  root: string;
  retentionMs: number;
  log: Logger;
  /** The server is shutting down: instances that stop now keep nothing (set by the store). */
  closing?: () => boolean;
  /**
   * Bytes the retained artifacts of every instance may take together; past it an artifact is not
   * kept. Default 16 GiB (the server's `artifactRetainMaxBytes`, src/server/config.ts).
   */
  maxRetainedBytes?: number;
  /** Takes `bytes` from the shared budget; false when they do not fit (set by the store). */
  reserve?: (bytes: number) => boolean;
  /** Gives `bytes` back to the shared budget (set by the store). */
  release?: (bytes: number) => void;
}

/** Every instance's artifacts, with the retention timers. */
export class ArtifactStore {
  readonly #opts: ArtifactStoreOptions;
  readonly #instances = new Map<string, InstanceArtifacts>();
  #closing = false;

  /** Bytes the retained artifacts of every instance take now. */
  #retained = 0;

  constructor(opts: ArtifactStoreOptions) {
    const max = opts.maxRetainedBytes ?? DEFAULT_MAX_RETAINED_BYTES;
    this.#opts = {
      ...opts,
      closing: () => this.#closing,
      reserve: (bytes) => {
        if (this.#retained + bytes > max) return false;
        this.#retained += bytes;
        return true;
      },
      release: (bytes) => {
        this.#retained = Math.max(0, this.#retained - bytes);
      },
    };
  }

  /** Bytes the retained artifacts of every instance take now (their apparent sizes). */
  get retainedBytes(): number {
    return this.#retained;
  }

  /** The server is going down: clips are still finalised, but nothing is copied out to keep. */
  closing(): void {
    this.#closing = true;
  }

  /** The artifacts of instance `id` (made on first use). */
  forInstance(id: string): InstanceArtifacts {
    let a = this.#instances.get(id);
    if (!a) {
      a = new InstanceArtifacts(id, this.#opts, () => this.#instances.delete(id));
      this.#instances.set(id, a);
    }
    return a;
  }

  /** Drop every retained artifact (server shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.#instances.values()].map((a) => a.expire()));
    await rm(this.#opts.root, { recursive: true, force: true });
  }
}

const DOWNLOADS = 'Downloads';
const RECORDINGS = 'Recordings';
/** Chromium's download GUIDs; nothing else is ever joined into a path. */
const GUID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

export class InstanceArtifacts {
  readonly #id: string;
  readonly #opts: ArtifactStoreOptions;
  readonly #forget: () => void;
  readonly #entries = new Map<string, Entry>();
  #home: (ArtifactHome & { real: string }) | undefined;
  #recorder: Recorder | undefined;
  #active: { entry: Entry; rec: ActiveRecording } | undefined;
  /** Start/stop of recordings, one at a time. */
  #recordingStep: Promise<unknown> = Promise.resolve();
  #finished: Promise<void> | undefined;
  #retainedDir: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #expired = false;
  /** Bytes taken from the store's shared budget, given back when the copies go. */
  #reserved = 0;

  constructor(id: string, opts: ArtifactStoreOptions, forget: () => void) {
    this.#id = id;
    this.#opts = opts;
    this.#forget = forget;
  }

  /** The instance's home exists: artifacts are read from there until `finish`. */
  async attach(home: ArtifactHome): Promise<void> {
    // a home reached through another mount namespace (`/proc/<pid>/root/…`: the tmpfs disk of
    // an unprivileged server's instance) is canonical already, and realpath would leave it
    this.#home = { ...home, real: viaProc(home.host) ? home.host : await realpath(home.host) };
  }

  /** How this instance records (set by its runtime). */
  setRecorder(recorder: Recorder): void {
    this.#recorder = recorder;
  }

  /** Where Chromium saves downloads, as its process sees it (`~/Downloads`). */
  get downloadDir(): string | undefined {
    return this.#home && posix.join(this.#home.inside, DOWNLOADS);
  }

  // -- downloads (fed by chromium/downloads.ts) ----------------------------------------------

  downloadBegan(guid: string, suggestedFilename: string): void {
    if (!GUID.test(guid) || this.#entries.has(guid) || this.#finished) return;
    const filename = safeFilename(suggestedFilename, 'download');
    this.#entries.set(guid, {
      id: guid,
      kind: 'download',
      rel: posix.join(DOWNLOADS, guid),
      filename,
      mime_type: mimeTypeOf(filename),
      created_at: new Date().toISOString(),
      startedMs: Date.now(),
      state: 'in_progress',
      received: 0,
      duration: null,
    });
  }

  downloadProgress(guid: string, receivedBytes: number, state: string): void {
    const e = this.#entries.get(guid);
    if (!e || e.kind !== 'download' || e.state !== 'in_progress' || this.#finished) return;
    if (Number.isFinite(receivedBytes) && receivedBytes >= 0) e.received = receivedBytes;
    if (state === 'completed') e.state = 'completed';
    else if (state === 'canceled') e.state = 'canceled';
  }

  async listDownloads(): Promise<Download[]> {
    await this.#finished;
    const out: Download[] = [];
    for (const e of this.#entries.values()) {
      if (e.kind !== 'download') continue;
      out.push({ ...(await this.#described(e)), state: e.state as DownloadState });
    }
    return out;
  }

  // -- recordings ------------------------------------------------------------------------------

  /** Start a clip; 409 while one runs; 400 where this instance type cannot record. */
  startRecording(): Promise<RecordingStartResult> {
    return this.#serial(async () => {
      const recorder = this.#recorder;
      const home = this.#home;
      if (!recorder || !home) throw serverError('recording_unavailable');
      if (this.#finished) throw serverError('instance_stopping');
      if (this.#active) {
        throw serverError('recording_in_progress', { id: this.#active.entry.id });
      }
      const id = `rec_${randomBytes(8).toString('hex')}`;
      const filename = `${id}.mp4`;
      const entry: Entry = {
        id,
        kind: 'recording',
        rel: posix.join(RECORDINGS, filename),
        filename,
        mime_type: 'video/mp4',
        created_at: new Date().toISOString(),
        startedMs: Date.now(),
        state: 'recording',
        received: 0,
        duration: null,
      };
      let rec: ActiveRecording;
      try {
        rec = await recorder(
          posix.join(home.inside, entry.rel),
          posix.join(home.inside, RECORDINGS),
        );
      } catch (err) {
        if (err instanceof HttpError) throw err; // no browser, no tab: the 400 that says so
        throw serverError('recording_failed', { reason: (err as Error).message });
      }
      this.#entries.set(id, entry);
      this.#active = { entry, rec };
      // an ffmpeg that ends without being asked ends its clip (reported failed unless it is fine)
      void rec.ended.then(() => {
        if (this.#active?.rec === rec) void this.#serial(() => this.#stopActiveIf(rec));
      });
      return { recording_id: id };
    });
  }

  /** Stop the running clip and finalise it; 409 when none runs. */
  stopRecording(): Promise<Recording> {
    return this.#serial(async () => {
      if (!this.#active) throw serverError('no_recording');
      const { entry } = this.#active;
      await this.#stopActive();
      return this.#recordingInfo(entry);
    });
  }

  async listRecordings(): Promise<Recording[]> {
    await this.#finished;
    const out: Recording[] = [];
    for (const e of this.#entries.values()) {
      if (e.kind === 'recording') out.push(await this.#recordingInfo(e));
    }
    return out;
  }

  async #recordingInfo(e: Entry): Promise<Recording> {
    return {
      ...(await this.#described(e)),
      state: e.state as RecordingState,
      duration_seconds: e.duration,
      ...(e.failure !== undefined ? { failure_reason: e.failure } : {}),
    };
  }

  /** What downloads and recordings both report of an artifact. */
  async #described(e: Entry) {
    return {
      id: e.id,
      filename: e.filename,
      size: await this.#size(e),
      mime_type: e.mime_type,
      created_at: e.created_at,
    };
  }

  async #stopActiveIf(rec: ActiveRecording): Promise<void> {
    if (this.#active?.rec === rec) await this.#stopActive();
  }

  async #stopActive(): Promise<void> {
    const active = this.#active;
    if (!active) return;
    this.#active = undefined;
    const { entry, rec } = active;
    const result = await rec.stop().catch((err: unknown) => ({
      ok: false,
      reason: (err as Error).message,
    }));
    entry.duration = Math.round((Date.now() - entry.startedMs) / 10) / 100;
    entry.state = result.ok ? 'completed' : 'failed';
    if (!result.ok) {
      entry.failure = result.reason ?? 'the recorder ended without a clip';
      this.#opts.log.warn({ instance: this.#id, reason: result.reason }, 'recording failed');
    }
  }

  #serial<T>(step: () => Promise<T>): Promise<T> {
    const next = this.#recordingStep.then(step, step);
    this.#recordingStep = next.catch(() => {});
    return next;
  }

  // -- reading -------------------------------------------------------------------------------

  /** The bytes of a finished artifact: 404 unknown or gone, 409 while still being written. */
  async open(kind: 'download' | 'recording', id: string): Promise<OpenedArtifact> {
    await this.#finished;
    const e = this.#entries.get(id);
    const missing = () =>
      kind === 'download'
        ? serverError('download_not_found', { id })
        : serverError('recording_not_found', { id });
    if (!e || e.kind !== kind) throw missing();
    if (e.state === 'in_progress' || e.state === 'recording') {
      throw serverError('artifact_in_progress', { kind, id });
    }
    if (e.state !== 'completed')
      throw serverError('artifact_unavailable', {
        kind,
        id,
        state: e.failure ? `${e.state} (${e.failure})` : e.state,
      });
    const fh = await this.#openFile(e);
    if (!fh) throw missing();
    const { size } = await fh.stat();
    // exactly `size` bytes, whatever the instance appends meanwhile (`end` is inclusive)
    let stream: Readable;
    if (size > 0) {
      stream = fh.createReadStream({ start: 0, end: size - 1 });
    } else {
      await fh.close();
      stream = Readable.from([]);
    }
    return { stream, size, filename: e.filename, mime_type: e.mime_type };
  }

  /** Current size of an artifact's file (bytes received, for a download in progress). */
  async #size(e: Entry): Promise<number> {
    if (e.retainedSize !== undefined) return e.retainedSize;
    if (e.state === 'in_progress') return e.received;
    if (this.#retainedDir !== undefined || this.#expired) return 0;
    const fh = await this.#openFile(e);
    if (!fh) return 0;
    try {
      return (await fh.stat()).size;
    } finally {
      await fh.close();
    }
  }

  /** Open the artifact's file where it is now, or undefined if it is not a safe regular file. */
  async #openFile(e: Entry): Promise<FileHandle | undefined> {
    if (this.#retainedDir !== undefined) {
      if (e.retainedSize === undefined) return undefined;
      return safeOpen(await realpath(this.#retainedDir), e.id);
    }
    if (this.#expired || !this.#home) return undefined;
    return safeOpen(this.#home.real, e.rel);
  }

  // -- the end of the instance -------------------------------------------------------------------

  /**
   * The instance is stopping (its processes still run): finalise the running clip, copy the
   * finished artifacts out of its disk, and keep them for the retention time. Idempotent.
   */
  finish(): Promise<void> {
    return (this.#finished ??= this.#finish());
  }

  async #finish(): Promise<void> {
    await this.#recordingStep;
    await this.#stopActive();
    for (const e of this.#entries.values()) {
      if (e.state === 'in_progress') e.state = 'interrupted';
    }
    const keep = [...this.#entries.values()].filter((e) => e.state === 'completed');
    if (!this.#home || keep.length === 0 || this.#opts.retentionMs <= 0 || this.#opts.closing?.()) {
      this.#expired = true;
      this.#entries.clear();
      this.#forget();
      return;
    }
    const dir = join(this.#opts.root, this.#id);
    try {
      await mkdir(this.#opts.root, { recursive: true, mode: 0o700 });
      await mkdir(dir, { mode: 0o700 });
      let budget = this.#home.budget ?? DEFAULT_RETAIN_BUDGET;
      for (const e of keep) {
        const fh = await safeOpen(this.#home.real, e.rel);
        if (!fh) continue;
        try {
          const { size, blocks } = await fh.stat();
          const refused = retainRefusal(size, blocks * 512, budget);
          if (refused === undefined && !this.#opts.reserve!(size)) {
            this.#notKept(e, size, 'the server keeps no more artifacts (maxRetainedBytes)');
            continue;
          }
          if (refused !== undefined) {
            this.#notKept(e, size, refused);
            continue;
          }
          budget -= size;
          this.#reserved += size;
          // the file name is the id (a GUID or rec_<hex>), checked when it was made; exactly
          // `size` bytes are copied, whatever the instance (still running) does meanwhile
          await copySparse(fh, size, join(dir, e.id));
          e.retainedSize = size;
        } finally {
          await fh.close();
        }
      }
    } catch (err) {
      this.#opts.log.warn({ err, instance: this.#id }, 'could not keep the instance artifacts');
    }
    this.#retainedDir = dir;
    for (const [id, e] of this.#entries) if (e.retainedSize === undefined) this.#entries.delete(id);
    this.#timer = setTimeout(() => void this.expire(), this.#opts.retentionMs);
    this.#timer.unref();
  }

  #notKept(e: Entry, size: number, reason: string): void {
    this.#opts.log.warn(
      { instance: this.#id, [e.kind]: e.id, size, reason },
      `${e.kind} not kept after the instance stopped`,
    );
  }

  /** Delete what was retained and forget every entry. */
  async expire(): Promise<void> {
    clearTimeout(this.#timer);
    this.#opts.release?.(this.#reserved);
    this.#reserved = 0;
    this.#expired = true;
    this.#entries.clear();
    const dir = this.#retainedDir;
    this.#forget();
    if (dir) await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

/**
 * Why a file of `size` bytes occupying `allocated` bytes on the instance's disk is not copied out
 * with `budget` bytes left, or undefined when it may be.
 */
export function retainRefusal(size: number, allocated: number, budget: number): string | undefined {
  if (size > budget) return `larger than what is left of the instance's budget (${budget} bytes)`;
  if (size > allocated + SPARSE_SLACK) {
    return `sparse: ${size} bytes long but only ${allocated} bytes on the disk`;
  }
  return undefined;
}

/**
 * Copies the first `size` bytes of `source` into a new file `dest` (created, never replaced),
 * leaving every all-zero chunk a hole: what the instance turns into holes while this runs costs
 * nothing here either.
 */
async function copySparse(source: FileHandle, size: number, dest: string): Promise<void> {
  const out = await open(dest, 'wx', 0o600);
  try {
    const buf = Buffer.alloc(COPY_CHUNK);
    for (let pos = 0; pos < size;) {
      const want = Math.min(COPY_CHUNK, size - pos);
      const { bytesRead } = await source.read(buf, 0, want, pos);
      if (bytesRead === 0) break; // shrunk meanwhile: the rest stays a hole
      const chunk = buf.subarray(0, bytesRead);
      if (!chunk.equals(ZEROS.subarray(0, bytesRead))) await out.write(chunk, 0, bytesRead, pos);
      pos += bytesRead;
    }
    await out.truncate(size);
  } finally {
    await out.close();
  }
}

/**
 * Open `rel` under `root` (a real path) for reading, refusing links, FIFOs and anything that is
 * not a regular file at exactly that path. Undefined when it is missing or refused.
 */
/** Whether `path` reaches into another process's mount namespace (`/proc/<pid>/root/…`). */
function viaProc(path: string): boolean {
  return /^\/proc\/\d+\/root\//.test(path);
}

async function safeOpen(root: string, rel: string): Promise<FileHandle | undefined> {
  const path = join(root, rel);
  if (!path.startsWith(`${root}/`)) return undefined;
  let fh: FileHandle;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = await fh.stat();
    const real = await readlink(`/proc/self/fd/${fh.fd}`);
    // through /proc/<pid>/root the descriptor names the path as its own mount namespace sees it
    const expected = viaProc(path) ? path.replace(/^\/proc\/\d+\/root/, '') : path;
    if (st.isFile() && real === expected) return fh;
  } catch {
    /* refused below */
  }
  await fh.close();
  return undefined;
}

/**
 * A file name from a page (`Content-Disposition`, the `download` attribute) made harmless for a
 * header and a user's disk: no directory part, no control characters, no leading dots, at most
 * 200 characters. It is only ever metadata: files are stored under their ids.
 */
export function safeFilename(name: string, fallback: string): string {
  const base = name.split(/[/\\]/).pop() ?? '';
  const clean = base
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, '_')
    .replace(/^[\s.]+/, '')
    .trim()
    .slice(0, 200);
  return clean === '' ? fallback : clean;
}

/** `Content-Disposition: attachment` naming `filename`, in ASCII and RFC 5987 UTF-8. */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const utf8 = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${ascii}"; filename*=UTF-8''${utf8}`;
}

const MIME: Record<string, string> = {
  bin: 'application/octet-stream',
  csv: 'text/csv',
  gif: 'image/gif',
  gz: 'application/gzip',
  htm: 'text/html',
  html: 'text/html',
  jpeg: 'image/jpeg',
  jpg: 'image/jpeg',
  json: 'application/json',
  mp3: 'audio/mpeg',
  mp4: 'video/mp4',
  pdf: 'application/pdf',
  png: 'image/png',
  svg: 'image/svg+xml',
  tar: 'application/x-tar',
  txt: 'text/plain',
  webm: 'video/webm',
  webp: 'image/webp',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  xml: 'application/xml',
  zip: 'application/zip',
};

/** The media type of a download, guessed from its name (CDP does not report the response's). */
export function mimeTypeOf(filename: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(filename)?.[1]?.toLowerCase();
  return (ext && MIME[ext]) || 'application/octet-stream';
}
