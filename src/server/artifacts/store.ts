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
 *   instance together (default 16 GiB, `BURROW_ARTIFACT_RETAIN_MAX_BYTES`; and at most 10,000
 *   files, `artifactMaxDownloads` 1,000 downloads per instance), and never more than a
 *   file really occupies inside: a sparse file (a hole of gigabytes costs nothing inside) is not
 *   kept, and zeros read while copying are written as holes, never as bytes. A file not kept is
 *   logged with the reason and is no longer listed.
 *   Copying out, rather than keeping the instance's disk image mounted, frees the loop device and
 *   everything else on the disk at once and keeps only the artifacts.
 *
 * Here: the store of every instance's artifacts and their shared budget. One instance's artifacts
 * are instance.ts, the checked file access and copy safe-files.ts, names and media types names.ts.
 */
import { rm } from 'node:fs/promises';
import { DEFAULT_ARTIFACT_RETAIN_MAX_BYTES } from '../config.js';
import type { Logger } from '../../internal/log.js';
import { InstanceArtifacts } from './instance.js';
import type { ArtifactStoreOptions } from './types.js';

export { InstanceArtifacts } from './instance.js';
export { contentDisposition, mimeTypeOf, safeFilename } from './names.js';
export { retainRefusal } from './safe-files.js';
export type {
  ActiveRecording,
  ArtifactHome,
  ArtifactStoreOptions,
  OpenedArtifact,
  Recorder,
} from './types.js';

/**
 * Files retained for every instance together: each is an inode and a block of the host's disk
 * whatever its size, so their number is bounded as well as their bytes (an instance lists and
 * keeps at most `artifactMaxDownloads` downloads, instance.ts).
 */
export const MAX_RETAINED_FILES = 10_000;

/** Every instance's artifacts, with the retention timers. */
export class ArtifactStore {
  readonly #opts: ArtifactStoreOptions;
  readonly #instances = new Map<string, InstanceArtifacts>();
  #closing = false;

  /** Bytes the retained artifacts of every instance take now. */
  #retained = 0;
  /** Files retained for every instance now. */
  #files = 0;

  constructor(opts: ArtifactStoreOptions) {
    const max = opts.maxRetainedBytes ?? DEFAULT_ARTIFACT_RETAIN_MAX_BYTES;
    this.#opts = {
      ...opts,
      closing: () => this.#closing,
      reserve: (bytes) => {
        if (this.#retained + bytes > max || this.#files >= MAX_RETAINED_FILES) return false;
        this.#retained += bytes;
        this.#files++;
        return true;
      },
      release: (bytes, files) => {
        this.#retained = Math.max(0, this.#retained - bytes);
        this.#files = Math.max(0, this.#files - files);
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
  forInstance(id: string, log?: Logger): InstanceArtifacts {
    let a = this.#instances.get(id);
    if (!a) {
      a = new InstanceArtifacts(id, this.#opts, () => this.#instances.delete(id), log);
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
