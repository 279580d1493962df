/**
 * One driver connection relayed by the transfer proxy (transfer.ts says what it rewrites and
 * why): the driver's file-input commands get their local files uploaded first, its download
 * behaviour is noted and download events are asked for, and completed downloads are brought here
 * before the driver hears of them. Only messages that may concern these are decoded.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { basename, join, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import WebSocket from 'ws';
import type { TransferApi, UploadCache } from './transfer-api.js';
import { freeName, listFiles, safeName } from './transfer-files.js';

/** Where uploads go, relative to the instance's home. */
const UPLOAD_DIR = '.burrow/uploads';
/** Chromium's download GUIDs; anything else is never used as a file name here. */
const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

const SET_FILES = Buffer.from('DOM.setFileInputFiles');
const CALL_FUNCTION = Buffer.from('Runtime.callFunctionOn');
/** How soon after a failed upload the driver's retry is expected (Playwright waits 20 ms). */
const RETRY_WINDOW_MS = 5_000;
const SET_DOWNLOADS = Buffer.from('.setDownloadBehavior');
const EVENT_PREFIXES = ['Browser.download', 'Page.download', 'Target.'].map((m) =>
  Buffer.from(`{"method":"${m}`),
);

/** A download's local destination, from the driver's `setDownloadBehavior`. */
interface DownloadTarget {
  dir: string;
  /** `allowAndName`: the file is named by its GUID; `allow`: by its suggested name. */
  byGuid: boolean;
  /** Whether the driver asked for download events. */
  events: boolean;
}

interface Download {
  target: DownloadTarget;
  suggestedFilename: string;
  /** Resolves once the bytes are in place here (true) or could not be (false). */
  saved?: Promise<boolean>;
}

/** One driver connection and its connection to the instance. */
export class Link {
  readonly #local: WebSocket;
  readonly #remote: WebSocket;
  readonly #api: TransferApi;
  readonly #uploads: UploadCache;
  /** Download destinations by browser context id ('' for the default context). */
  readonly #targets = new Map<string, DownloadTarget>();
  /** Browser context of each target (a page's main frame id is its target id). */
  readonly #contexts = new Map<string, string>();
  readonly #downloads = new Map<string, Download>();
  readonly #abort = new AbortController();
  readonly #retriesFileInputs: boolean;
  /** Sessions ('' for the browser's) whose driver is retrying a failed upload → why it failed. */
  readonly #failedUploads = new Map<string, { message: string; until: number }>();

  /** `remote`: the instance's socket, open. */
  constructor(
    local: WebSocket,
    remote: WebSocket,
    api: TransferApi,
    uploads: UploadCache,
    retriesFileInputs: boolean,
  ) {
    this.#local = local;
    this.#remote = remote;
    this.#api = api;
    this.#uploads = uploads;
    this.#retriesFileInputs = retriesFileInputs;
    local.on('message', (data, binary) => this.#fromDriver(data as Buffer, binary));
    remote.on('message', (data, binary) => this.#fromBrowser(data as Buffer, binary));
    const closeBoth = () => this.close();
    local.on('error', closeBoth).once('close', closeBoth);
    remote.on('error', closeBoth).once('close', closeBoth);
    if (remote.readyState !== WebSocket.OPEN) this.close();
  }

  close(): void {
    this.#abort.abort();
    for (const ws of [this.#local, this.#remote]) {
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else if (ws.readyState === WebSocket.OPEN) ws.close();
    }
  }

  #toBrowser(data: Buffer | string, binary = false): void {
    if (this.#remote.readyState === WebSocket.OPEN) this.#remote.send(data, { binary });
  }

  #toDriver(data: Buffer | string, binary = false): void {
    if (this.#local.readyState === WebSocket.OPEN) this.#local.send(data, { binary });
  }

  // -- driver → browser --------------------------------------------------------------------

  #fromDriver(data: Buffer, binary: boolean): void {
    if (this.#failedUploads.size > 0 && data.includes(CALL_FUNCTION)) {
      const msg = parse(data);
      if (msg?.method === 'Runtime.callFunctionOn' && this.#endRetry(msg)) return;
    }
    if (data.includes(SET_FILES)) {
      const msg = parse(data);
      if (msg?.method === 'DOM.setFileInputFiles') return void this.#setFiles(msg);
    } else if (data.includes(SET_DOWNLOADS)) {
      const msg = parse(data);
      if (
        msg &&
        (msg.method === 'Browser.setDownloadBehavior' || msg.method === 'Page.setDownloadBehavior')
      ) {
        return this.#toBrowser(JSON.stringify(this.#setDownloads(msg)));
      }
    }
    this.#toBrowser(data, binary);
  }

  /** Uploads the local files the command names, then sends it with their in-instance paths. */
  async #setFiles(msg: CdpMessage): Promise<void> {
    const params = (msg.params ?? {}) as { files?: unknown };
    try {
      if (Array.isArray(params.files)) {
        const files: unknown[] = [];
        for (const file of params.files) {
          files.push(typeof file === 'string' ? await this.#remotePath(file) : file);
        }
        msg.params = { ...params, files };
      }
      this.#toBrowser(JSON.stringify(msg));
    } catch (err) {
      const message = `burrow could not upload a file for DOM.setFileInputFiles: ${(err as Error).message}`;
      if (this.#retriesFileInputs) {
        this.#failedUploads.set(msg.sessionId ?? '', {
          message,
          until: Date.now() + RETRY_WINDOW_MS,
        });
      }
      this.#toDriver(
        JSON.stringify({
          id: msg.id,
          error: { code: -32000, message },
          ...(msg.sessionId !== undefined && { sessionId: msg.sessionId }),
        }),
      );
    }
  }

  /**
   * Playwright retries an action whose protocol command failed until its timeout (30 s by
   * default), then reports a bare timeout; an exception in the page ends its retries at once.
   * So the first script call on the session of a failed upload, right after it (Playwright's
   * retry looking for the input again), is answered with that exception, naming the failure:
   * `setInputFiles` rejects at once with the reason.
   */
  #endRetry(msg: CdpMessage): boolean {
    const key = msg.sessionId ?? '';
    const failed = this.#failedUploads.get(key);
    if (!failed) return false;
    this.#failedUploads.delete(key);
    if (Date.now() > failed.until) return false;
    const description = `Error: ${failed.message}`;
    this.#toDriver(
      JSON.stringify({
        id: msg.id,
        result: {
          result: { type: 'object', subtype: 'error', className: 'Error', description },
          exceptionDetails: {
            exceptionId: 0,
            text: 'Uncaught',
            lineNumber: 0,
            columnNumber: 0,
            exception: { type: 'object', subtype: 'error', className: 'Error', description },
          },
        },
        ...(msg.sessionId !== undefined && { sessionId: msg.sessionId }),
      }),
    );
    return true;
  }

  /**
   * The in-instance path for `file`: uploaded when it exists here, else `file` itself. What was
   * sent unchanged (same sizes and modification times) is not sent again.
   */
  async #remotePath(file: string): Promise<string> {
    const info = await stat(file).catch(() => undefined);
    if (!info || (!info.isFile() && !info.isDirectory())) return file;
    const dir = `${UPLOAD_DIR}/${randomBytes(8).toString('hex')}`;
    const name = basename(file) || 'upload';
    if (info.isFile()) {
      const key = `${file}\0${info.size}\0${info.mtimeMs}`;
      return this.#uploads.get(file, key, () => this.#api.upload(file, `${dir}/${name}`));
    }
    // a directory (webkitdirectory inputs): every file under it, the tree kept
    const entries = await listFiles(file);
    const key = `${file}/\0${JSON.stringify(entries)}`;
    return this.#uploads.get(file, key, async () => {
      if (entries.length === 0) throw new Error(`${file} holds no files`);
      let root: string | undefined;
      for (const { rel } of entries) {
        const remoteRel = `${name}/${rel.split(sep).join('/')}`;
        const uploaded = await this.#api.upload(join(file, rel), `${dir}/${remoteRel}`);
        root ??= uploaded.slice(0, uploaded.length - remoteRel.length) + name;
      }
      return root!;
    });
  }

  /**
   * Notes where the driver wants downloads of the context and asks the browser for events (the
   * server points the bytes at the instance whatever path is given).
   */
  #setDownloads(msg: CdpMessage): CdpMessage {
    const params = (msg.params ?? {}) as Record<string, unknown>;
    const context = typeof params.browserContextId === 'string' ? params.browserContextId : '';
    const { behavior, downloadPath } = params;
    if ((behavior === 'allow' || behavior === 'allowAndName') && typeof downloadPath === 'string') {
      this.#targets.set(context, {
        dir: downloadPath,
        byGuid: behavior === 'allowAndName',
        events: params.eventsEnabled === true,
      });
      if (msg.method === 'Browser.setDownloadBehavior') {
        return { ...msg, params: { ...params, eventsEnabled: true } };
      }
    } else {
      this.#targets.delete(context);
    }
    return msg;
  }

  // -- browser → driver --------------------------------------------------------------------

  #fromBrowser(data: Buffer, binary: boolean): void {
    // events start `{"method":"<name>"` as Chromium writes them; replies start `{"id":`
    if (data[2] === 0x6d && EVENT_PREFIXES.some((p) => p.compare(data, 0, p.length) === 0)) {
      const msg = parse(data);
      if (msg && this.#event(msg)) return;
    }
    this.#toDriver(data, binary);
  }

  /**
   * Handles an event the proxy cares about; true when it took it over (holds it back, or drops an
   * event the driver did not ask for). `Page.download*` events reach every page session that
   * enabled the Page domain, with or without a download behaviour, so they always go on.
   */
  #event(msg: CdpMessage): boolean {
    const params = (msg.params ?? {}) as Record<string, unknown>;
    const browserEvent = msg.method!.startsWith('Browser.');
    switch (msg.method) {
      case 'Target.targetCreated':
      case 'Target.targetInfoChanged':
      case 'Target.attachedToTarget': {
        const info = params.targetInfo as { targetId?: unknown; browserContextId?: unknown };
        if (typeof info?.targetId === 'string' && typeof info.browserContextId === 'string') {
          this.#contexts.set(info.targetId, info.browserContextId);
        }
        return false;
      }
      case 'Browser.downloadWillBegin':
      case 'Page.downloadWillBegin': {
        const guid = params.guid;
        const target = this.#targetFor(params.frameId);
        if (typeof guid !== 'string' || !target) return false;
        const suggested =
          typeof params.suggestedFilename === 'string' ? params.suggestedFilename : '';
        if (!this.#downloads.has(guid)) {
          this.#downloads.set(guid, { target, suggestedFilename: suggested });
        }
        return browserEvent && !target.events;
      }
      case 'Browser.downloadProgress':
      case 'Page.downloadProgress': {
        const guid = params.guid;
        const download = typeof guid === 'string' ? this.#downloads.get(guid) : undefined;
        if (!download) return false;
        const heard = !browserEvent || download.target.events;
        if (params.state !== 'completed') return !heard;
        download.saved ??= this.#save(guid as string, download).then(
          () => true,
          (err: unknown) => {
            // the driver hears only `canceled`: say why, once
            if (!this.#abort.signal.aborted) {
              process.emitWarning(
                `burrow could not bring download ${JSON.stringify(download.suggestedFilename)} to ${download.target.dir}: ${(err as Error).message}`,
                { code: 'BURROW_DOWNLOAD_FAILED' },
              );
            }
            return false;
          },
        );
        void download.saved.then((ok) => {
          if (!heard) return;
          // a download whose bytes could not be brought here ends for the driver as canceled
          this.#toDriver(
            JSON.stringify(ok ? msg : { ...msg, params: { ...params, state: 'canceled' } }),
          );
        });
        return true;
      }
      default:
        return false;
    }
  }

  #targetFor(frameId: unknown): DownloadTarget | undefined {
    const context = typeof frameId === 'string' ? this.#contexts.get(frameId) : undefined;
    const byContext = context !== undefined ? this.#targets.get(context) : undefined;
    if (byContext) return byContext;
    if (this.#targets.has('')) return this.#targets.get('');
    return this.#targets.size === 1 ? this.#targets.values().next().value : undefined;
  }

  async #save(guid: string, download: Download): Promise<void> {
    if (!GUID.test(guid)) throw new Error(`not a download GUID: ${guid}`);
    const { dir, byGuid } = download.target;
    await mkdir(dir, { recursive: true });
    const bytes = await this.#api.download(guid, this.#abort.signal);
    const part = join(dir, `.${guid}.part`);
    try {
      await pipeline(bytes, createWriteStream(part, { mode: 0o644 }), {
        signal: this.#abort.signal,
      });
      const name = byGuid ? guid : await freeName(dir, safeName(download.suggestedFilename));
      await rename(part, join(dir, name));
    } catch (err) {
      await rm(part, { force: true });
      throw err;
    }
  }
}

interface CdpMessage {
  id?: number;
  method?: string;
  params?: unknown;
  sessionId?: string;
  [key: string]: unknown;
}

function parse(data: Buffer): CdpMessage | undefined {
  try {
    const value: unknown = JSON.parse(data.toString());
    return value !== null && typeof value === 'object' ? (value as CdpMessage) : undefined;
  } catch {
    return undefined;
  }
}
