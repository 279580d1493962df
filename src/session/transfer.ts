/**
 * File transfer for the bridge: local files into the remote browser's file inputs, and the remote
 * browser's downloads onto this machine, so that a script behaves as with a local browser.
 *
 * The driver (Playwright or Puppeteer) connects to a small CDP proxy in this process (a loopback
 * WebSocket with a random path) instead of the instance's `cdp_url`; the proxy relays every
 * message unchanged except:
 *
 * - `DOM.setFileInputFiles` (Playwright's `setInputFiles` / `fileChooser.setFiles`, Puppeteer's
 *   `uploadFile` / `fileChooser.accept`): each path that names a file (or directory) on this
 *   machine is streamed to the instance first with the `upload` operation, into
 *   `~/.burrow/uploads/<random>/<name>`, and the command goes on with the in-instance paths. A path
 *   that exists only in the instance passes unchanged. The same unchanged file is sent once per
 *   session.
 * - `Browser.setDownloadBehavior` / `Page.setDownloadBehavior` with `allow` or `allowAndName` and a
 *   `downloadPath`: the proxy notes the local directory and asks for download events (the server
 *   keeps the bytes in the instance, src/server/chromium/downloads.ts). When a download
 *   completes, the proxy fetches its bytes from `GET /v1/instance/{id}/downloads/{guid}` and writes
 *   them where a local Chromium would have (`<downloadPath>/<guid>` for `allowAndName`, as
 *   Playwright expects; `<downloadPath>/<suggested name>` for `allow`, as Puppeteer users expect)
 *   before the driver sees `downloadProgress: completed`. Events the driver did not ask for are
 *   not passed on. A download whose bytes cannot be fetched reaches the driver as `canceled`, at
 *   once, and a process warning (`BURROW_DOWNLOAD_FAILED`) says why.
 *
 * Only messages that may concern these are decoded: commands are searched for the method names
 * (Buffer search), events are recognised by their first bytes; everything else is forwarded as it
 * came. The proxy accepts only loopback connections on its random path, and lives as long as the
 * driver's connection.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename, join, relative, sep } from 'node:path';
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket, { WebSocketServer } from 'ws';
import { CDP_MAX_MESSAGE_BYTES } from '../api/cdp-limits.js';
import { APIError, type Burrow } from '../client/index.js';
import type { DriverConnectOptions, DriverConnection } from './driver.js';

/** Largest CDP message relayed: the most the server's relay sends (src/api/cdp-limits.ts). */
const MAX_PAYLOAD = CDP_MAX_MESSAGE_BYTES;
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

export interface TransferProxyOptions {
  /** The instance's `cdp_url` (browser endpoint). */
  cdpUrl: string;
  api: TransferApi;
  /** Shared by the proxies of one session: local file → in-instance path. */
  uploads?: UploadCache;
  /**
   * The driver retries a failed `DOM.setFileInputFiles` until its timeout (Playwright): the
   * proxy then ends the retries at once (see `Link.#setFiles`). Default false (Puppeteer fails
   * on the first error).
   */
  retriesFileInputs?: boolean;
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
  driver: 'playwright' | 'puppeteer' = 'playwright',
): TransferSetup {
  return {
    api: clientTransferApi(client, instanceId),
    uploads: new UploadCache(),
    retriesFileInputs: driver === 'playwright',
  };
}

/**
 * Connects a driver to `cdpUrl`: through a transfer proxy when `transfer` is given (the proxy
 * closes with the connection), else directly. `local` tells the driver that the browser sees this
 * machine's files (Playwright then passes paths to `DOM.setFileInputFiles`, which the proxy
 * uploads, instead of the file's bytes inlined in the page, limited to 50 MB).
 */
export async function connectDriver(
  driver: { connect(url: string, options?: DriverConnectOptions): Promise<DriverConnection> },
  cdpUrl: string,
  options: DriverConnectOptions,
  transfer: TransferSetup | undefined,
): Promise<DriverConnection> {
  if (!transfer) return driver.connect(cdpUrl, options);
  const proxy = await TransferProxy.open({ cdpUrl, ...transfer });
  try {
    const conn = await driver.connect(proxy.url, { ...options, local: true });
    void conn.closed.then(() => proxy.close());
    return conn;
  } catch (err) {
    await proxy.close();
    throw err;
  }
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

/** The local CDP proxy in front of one `cdp_url`. */
export class TransferProxy {
  /** The URL to give the driver: `ws://127.0.0.1:<port>/<random>`. */
  readonly url: string;
  readonly #server: Server;
  readonly #wss: WebSocketServer;
  readonly #links = new Set<Link>();
  #closed: Promise<void> | undefined;

  private constructor(server: Server, wss: WebSocketServer, url: string) {
    this.#server = server;
    this.#wss = wss;
    this.url = url;
  }

  static async open(opts: TransferProxyOptions): Promise<TransferProxy> {
    const secret = randomBytes(18).toString('base64url');
    const path = `/${secret}/devtools/browser`;
    const server = createServer((_req, res) => res.writeHead(404).end());
    const wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      maxPayload: MAX_PAYLOAD,
      // the bytes are relayed, not read: the driver and the browser check their own input
      skipUTF8Validation: true,
    });
    const uploads = opts.uploads ?? new UploadCache();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    server.unref(); // the listener alone never keeps the process alive
    const { port } = server.address() as AddressInfo;
    server.unref(); // a session's proxy never holds the process by itself (keepalive.ts)
    const proxy = new TransferProxy(server, wss, `ws://127.0.0.1:${port}${path}`);
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => socket.destroy());
      if (req.url !== path || proxy.#closed) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      // the instance's socket first: a refusal there is the driver's answer, status and body
      const remote = new WebSocket(opts.cdpUrl, {
        perMessageDeflate: false,
        maxPayload: MAX_PAYLOAD,
        skipUTF8Validation: true,
      });
      let answered = false;
      const refuse = (status: number, reason: string, body: Buffer) => {
        if (answered) return;
        answered = true;
        const head =
          `HTTP/1.1 ${status} ${reason.replace(/[^\x20-\x7e]/g, '')}\r\nConnection: close\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
        socket.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
      };
      socket.once('close', () => {
        if (remote.readyState === WebSocket.CONNECTING) remote.terminate();
      });
      remote.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('end', () => {
          refuse(res.statusCode ?? 502, res.statusMessage ?? '', Buffer.concat(chunks));
          remote.terminate();
        });
        res.once('error', () => socket.destroy());
      });
      remote.on('error', (err) => {
        const where = redactedUrl(opts.cdpUrl);
        const detail = JSON.stringify({ detail: `cannot reach ${where}: ${err.message}` });
        refuse(502, 'Bad Gateway', Buffer.from(detail));
      });
      remote.once('open', () => {
        answered = true;
        if (proxy.#closed || socket.destroyed) return remote.terminate();
        wss.handleUpgrade(req, socket, head, (ws) => {
          const link = new Link(ws, remote, opts.api, uploads, opts.retriesFileInputs ?? false);
          proxy.#links.add(link);
          ws.once('close', () => proxy.#links.delete(link));
        });
      });
    });
    return proxy;
  }

  /** Closes every relayed connection and the listener. Idempotent. */
  close(): Promise<void> {
    return (this.#closed ??= (async () => {
      for (const link of this.#links) link.close();
      this.#wss.close();
      await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    })());
  }
}

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
class Link {
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

/** `url` without its query (where `cdp_url` carries the instance's token). */
function redactedUrl(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : `${url.slice(0, q)}?…`;
}

/** A page's suggested file name as one safe path segment. */
export function safeName(suggested: string): string {
  // eslint-disable-next-line no-control-regex
  const cleaned = suggested.replace(/[\u0000-\u001f/\\]/g, '_').trim();
  const name = posix.basename(cleaned);
  return name === '' || name === '.' || name === '..' ? 'download' : name;
}

/** `name`, or `name (1).ext`, `name (2).ext` … if taken, as Chromium names repeated downloads. */
async function freeName(dir: string, name: string): Promise<string> {
  const dot = name.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  for (let i = 0; ; i++) {
    const candidate = i === 0 ? name : `${stem} (${i})${ext}`;
    const taken = await stat(join(dir, candidate)).then(
      () => true,
      () => false,
    );
    if (!taken) return candidate;
  }
}

/** Regular files under `dir` (symlinks followed, as Chromium would), relative to it. */
async function listFiles(dir: string): Promise<{ rel: string; size: number; mtimeMs: number }[]> {
  const out: { rel: string; size: number; mtimeMs: number }[] = [];
  const walk = async (at: string) => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      const full = join(at, entry.name);
      const info = await stat(full).catch(() => undefined);
      if (info?.isDirectory()) await walk(full);
      else if (info?.isFile()) {
        out.push({ rel: relative(dir, full), size: info.size, mtimeMs: info.mtimeMs });
      }
    }
  };
  await walk(dir);
  return out.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}
