/**
 * What the artifact store and an instance's artifacts speak of: the instance's home, how an
 * instance type records, an opened artifact, and the store's options.
 */
import type { Readable } from 'node:stream';
import type { Logger } from '../../internal/log.js';

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
   * kept. Default the server's `artifactRetainMaxBytes` default (src/server/config.ts).
   */
  maxRetainedBytes?: number;
  /** Downloads one instance lists and keeps (instance.ts). Default 1000. */
  maxDownloads?: number;
  /**
   * Takes `bytes` and one file from the shared budget; false when they do not fit (set by the
   * store).
   */
  reserve?: (bytes: number) => boolean;
  /** Gives `bytes` and `files` back to the shared budget (set by the store). */
  release?: (bytes: number, files: number) => void;
}
