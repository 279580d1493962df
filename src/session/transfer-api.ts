/**
 * What the bridge's transfer proxy (transfer.ts) asks of the API: a local file streamed into the
 * instance (`upload`), and a download's bytes once the server has them all; and what one session
 * keeps for its proxies, among it the files it already sent.
 */
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { APIError, type Burrow } from '../client/index.js';
import type { DriverName } from './driver.js';

/** What the proxy asks of the API. */
export interface TransferApi {
  /**
   * Stream the local file `localPath` into the instance at `remotePath` (relative to its home);
   * resolve with the in-instance path.
   */
  upload(localPath: string, remotePath: string): Promise<string>;
  /** The bytes of download `guid`, once the server has them all. */
  download(guid: string, signal: AbortSignal): Promise<Readable>;
}

/** Deadline of one file's upload or download through the API. */
const TRANSFER_TIMEOUT_MS = 3_600_000;
/** How long a completed download may stay unfetchable (the server hears of it a moment later). */
const DOWNLOAD_WAIT_MS = 30_000;

/** What a session keeps for its proxies: how to reach the API, and what it uploaded already. */
export interface TransferSetup {
  api: TransferApi;
  uploads: UploadCache;
  retriesFileInputs?: boolean;
}

export function transferSetup(
  client: Burrow,
  instanceId: string,
  driver: DriverName = 'playwright',
): TransferSetup {
  return {
    api: clientTransferApi(client, instanceId),
    uploads: new UploadCache(),
    retriesFileInputs: driver === 'playwright',
  };
}

/** `TransferApi` on a client: the `upload` operation and `GET …/downloads/{download_id}`. */
export function clientTransferApi(client: Burrow, instanceId: string): TransferApi {
  return {
    async upload(localPath, remotePath) {
      const opts = { timeoutMs: TRANSFER_TIMEOUT_MS };
      const result = await client.instance.upload(
        instanceId,
        { file: localPath, path: remotePath },
        opts,
      );
      return result.path;
    },
    async download(guid, signal) {
      const deadline = Date.now() + DOWNLOAD_WAIT_MS;
      for (let delay = 25; ; delay = Math.min(delay * 2, 500)) {
        try {
          const res = await client.downloads.get(instanceId, guid, {
            signal,
            timeoutMs: TRANSFER_TIMEOUT_MS,
          });
          return res.body;
        } catch (err) {
          // still being written as the server sees it, or not seen yet; one that ended without
          // a file (canceled, failed, interrupted) never will be: no use waiting
          const waiting =
            err instanceof APIError &&
            (err.status === 404 ||
              (err.status === 409 && err.serverCode !== 'artifact_unavailable'));
          if (!waiting || Date.now() + delay > deadline) throw err;
          await sleep(delay);
          signal.throwIfAborted();
        }
      }
    },
  };
}

/** How long a failed upload answers again with its failure instead of being tried anew. */
const FAILURE_MEMORY_MS = 10_000;

/**
 * Local files already sent, by path, size and modification time. A failure is remembered for a
 * moment: Playwright retries a failing `DOM.setFileInputFiles` until its timeout, and each retry
 * should not send the file again.
 */
export class UploadCache {
  readonly #sent = new Map<string, Promise<string>>();

  /** The in-instance path of local `file` (`key`: its identity), sending it if need be. */
  get(file: string, key: string, send: () => Promise<string>): Promise<string> {
    let sent = this.#sent.get(key);
    if (!sent) {
      sent = send();
      this.#sent.set(key, sent);
      sent.catch((err: unknown) => {
        // Playwright's retries hide the CDP error behind its timeout: say why, once
        process.emitWarning(`burrow could not upload ${file}: ${(err as Error).message}`, {
          code: 'BURROW_UPLOAD_FAILED',
        });
        setTimeout(() => this.#sent.delete(key), FAILURE_MEMORY_MS).unref();
      });
    }
    return sent;
  }
}
