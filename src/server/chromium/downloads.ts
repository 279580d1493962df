/**
 * Downloads of a Chromium are kept in its instance, whatever a CDP client asks for.
 *
 * - On launch the server's own session sets `Browser.setDownloadBehavior` to `allowAndName` into
 *   the instance's `~/Downloads` (files named by download GUID) with events on, for the default
 *   context, and for every context a client creates (`Target.createBrowserContext`, handled by
 *   the mux before the client sees the reply, so no page of it can download first) or that shows
 *   up otherwise (`Target.targetCreated` with an unseen context).
 * - A client's `Browser.setDownloadBehavior` / `Page.setDownloadBehavior` is rewritten by the
 *   relay (mux.ts `rewrite`): `allow`, `allowAndName` and `default` become `allowAndName` into the
 *   same directory, keeping the client's context and `eventsEnabled`, so its download events
 *   (`Browser.downloadWillBegin` / `downloadProgress`, with the GUID) still reach it while the
 *   bytes land in the instance; a path on the client's machine means nothing here. `deny` stays
 *   `deny`: a client that refuses downloads gets none.
 * - The server's session hears every download's events and tells the instance's artifacts
 *   (../artifacts/store.ts), where the GUID is the download's id on the wire.
 */
import type { CdpConnection } from './cdp.js';
import type { CdpParams } from './transport.js';

/** What the downloads are reported to (`InstanceArtifacts`). */
export interface DownloadSink {
  /** The download directory as Chromium sees it. */
  readonly downloadDir: string | undefined;
  downloadBegan(guid: string, suggestedFilename: string): void;
  downloadProgress(guid: string, receivedBytes: number, state: string): void;
}

export class DownloadWatch {
  readonly #sink: DownloadSink;
  readonly #contexts = new Set<string>();
  #cdp: CdpConnection | undefined;
  #defaultContext = '';

  constructor(sink: DownloadSink) {
    this.#sink = sink;
  }

  /**
   * Set the behaviour on the default context and listen (the server's own session). The command
   * goes out at once, beside the one that asks for `defaultContextId` (a round trip less while
   * Chromium is still busy starting); only the contexts created later need that id.
   */
  async start(cdp: CdpConnection, defaultContextId: Promise<string>): Promise<void> {
    this.#cdp = cdp;
    cdp.on('Browser.downloadWillBegin', (p) => {
      if (typeof p.guid === 'string') {
        this.#sink.downloadBegan(
          p.guid,
          typeof p.suggestedFilename === 'string' ? p.suggestedFilename : '',
        );
      }
    });
    cdp.on('Browser.downloadProgress', (p) => {
      if (typeof p.guid === 'string') {
        this.#sink.downloadProgress(p.guid, Number(p.receivedBytes), String(p.state));
      }
    });
    const params = this.#params(undefined);
    const [id] = await Promise.all([
      defaultContextId,
      params && cdp.send('Browser.setDownloadBehavior', params),
    ]);
    this.#defaultContext = id;
    this.#contexts.add(id);
    // the targets reported before are the startup tab's, in the default context
    cdp.on('Target.targetCreated', (p) => {
      const ctx = (p.targetInfo as { browserContextId?: unknown } | undefined)?.browserContextId;
      if (typeof ctx === 'string') this.contextCreated(ctx);
    });
  }

  /**
   * A browser context exists: the server's session sets its behaviour now. Called by the mux with
   * a client's `Target.createBrowserContext` reply before that reply is delivered; the command is
   * on the pipe before anything the client can send about the context.
   */
  contextCreated(browserContextId: string): void {
    if (this.#contexts.has(browserContextId)) return;
    this.#contexts.add(browserContextId);
    const params = this.#params(browserContextId);
    if (params && this.#cdp?.isOpen) {
      // the context may be gone already (created and disposed at once)
      this.#cdp
        .send('Browser.setDownloadBehavior', params)
        .catch(() => this.#forget(browserContextId));
    }
  }

  /**
   * A client went away: Chromium put every context whose behaviour that client had set back to
   * its default, so the server sets them again (the command follows the client's detach on the
   * pipe, so Chromium applies it after the reset).
   */
  reassert(): void {
    const cdp = this.#cdp;
    if (!cdp?.isOpen) return;
    const others = [...this.#contexts].filter((id) => id !== this.#defaultContext);
    for (const id of [undefined, ...others]) {
      const params = this.#params(id);
      // a context that is gone is refused, and forgotten (a suite makes one per test)
      if (params) cdp.send('Browser.setDownloadBehavior', params).catch(() => this.#forget(id));
    }
  }

  /** A client's command, with its download behaviour pointed at the instance. */
  rewrite(method: string, params: CdpParams): CdpParams {
    if (method !== 'Browser.setDownloadBehavior' && method !== 'Page.setDownloadBehavior') {
      return params;
    }
    const dir = this.#sink.downloadDir;
    if (!dir || params.behavior === 'deny') return params;
    const { downloadPath: _ignored, ...rest } = params;
    return { ...rest, behavior: 'allowAndName', downloadPath: dir };
  }

  #forget(browserContextId: string | undefined): void {
    if (browserContextId !== undefined && browserContextId !== this.#defaultContext) {
      this.#contexts.delete(browserContextId);
    }
  }

  #params(browserContextId: string | undefined): CdpParams | undefined {
    const dir = this.#sink.downloadDir;
    if (!dir) return undefined;
    return {
      behavior: 'allowAndName',
      downloadPath: dir,
      eventsEnabled: true,
      ...(browserContextId !== undefined && { browserContextId }),
    };
  }
}
