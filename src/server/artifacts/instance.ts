/**
 * One instance's downloads and recordings (store.ts says where they live and why): fed by the
 * browser's download events and the recording routes, read with the checks of safe-files.ts, and
 * at the instance's end finalised, copied out within their budgets and kept for the retention
 * time.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, realpath, rm, type FileHandle } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { Readable } from 'node:stream';
import type { Logger } from '../../internal/log.js';
import type { Download, Recording, RecordingStartResult } from '../../api/index.js';
import { DEFAULT_ARTIFACT_MAX_DOWNLOADS, DEFAULT_INSTANCE_LIMITS } from '../config.js';
import { HttpError, serverError } from '../errors.js';
import { mimeTypeOf, safeFilename } from './names.js';
import { copySparse, retainRefusal, safeOpen, viaProc } from './safe-files.js';
import type {
  ActiveRecording,
  ArtifactHome,
  ArtifactStoreOptions,
  OpenedArtifact,
  Recorder,
} from './types.js';

/** Bound of the retained copy when the instance had no disk quota: a default instance's disk. */
const DEFAULT_RETAIN_BUDGET = DEFAULT_INSTANCE_LIMITS.diskBytes;

type DownloadState = Download['state'];
type RecordingState = Recording['state'];

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

const DOWNLOADS = 'Downloads';
const RECORDINGS = 'Recordings';
/** Chromium's download GUIDs; nothing else is ever joined into a path. */
const GUID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

export class InstanceArtifacts {
  readonly #id: string;
  readonly #opts: ArtifactStoreOptions;
  readonly #forget: () => void;
  readonly #log: Logger;
  readonly #entries = new Map<string, Entry>();
  #downloads = 0;
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
  #reservedFiles = 0;

  /** `log`: the instance's own (bounded) logger; default the store's. */
  constructor(id: string, opts: ArtifactStoreOptions, forget: () => void, log?: Logger) {
    this.#id = id;
    this.#opts = opts;
    this.#forget = forget;
    this.#log = log ?? opts.log;
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
    // each download is an entry in the server's memory while the instance runs and a file (an
    // inode, a block) on the host after its stop, however small; a `cdp_url` holder makes one per
    // `Page.navigate` to an octet-stream URL, past Chromium's own limiter. Past the count, a
    // download still lands in the instance's home (its disk, its quota) but is neither listed nor
    // kept, and the log says so (bounded per instance: src/internal/log-budget.ts)
    const limit = this.#opts.maxDownloads ?? DEFAULT_ARTIFACT_MAX_DOWNLOADS;
    if (this.#downloads >= limit) {
      this.#log.warn(
        { instance: this.#id, download: guid, limit },
        'download neither listed nor kept: the instance has made as many as one may',
      );
      return;
    }
    this.#downloads++;
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
      this.#log.warn({ instance: this.#id, reason: result.reason }, 'recording failed');
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
            this.#notKept(
              e,
              size,
              'the server keeps no more artifacts (maxRetainedBytes, or 10,000 files)',
            );
            continue;
          }
          if (refused !== undefined) {
            this.#notKept(e, size, refused);
            continue;
          }
          budget -= size;
          this.#reserved += size;
          this.#reservedFiles++;
          // the file name is the id (a GUID or rec_<hex>), checked when it was made; exactly
          // `size` bytes are copied, whatever the instance (still running) does meanwhile
          await copySparse(fh, size, join(dir, e.id));
          e.retainedSize = size;
        } finally {
          await fh.close();
        }
      }
    } catch (err) {
      this.#log.warn({ err, instance: this.#id }, 'could not keep the instance artifacts');
    }
    this.#retainedDir = dir;
    for (const [id, e] of this.#entries) if (e.retainedSize === undefined) this.#entries.delete(id);
    this.#timer = setTimeout(() => void this.expire(), this.#opts.retentionMs);
    this.#timer.unref();
  }

  #notKept(e: Entry, size: number, reason: string): void {
    this.#log.warn(
      { instance: this.#id, [e.kind]: e.id, size, reason },
      `${e.kind} not kept after the instance stopped`,
    );
  }

  /** Delete what was retained and forget every entry. */
  async expire(): Promise<void> {
    clearTimeout(this.#timer);
    this.#opts.release?.(this.#reserved, this.#reservedFiles);
    this.#reserved = 0;
    this.#reservedFiles = 0;
    this.#expired = true;
    this.#entries.clear();
    const dir = this.#retainedDir;
    this.#forget();
    if (dir) await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}
