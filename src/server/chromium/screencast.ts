/**
 * The live view of a browser instance: CDP screencast of the active tab (`Page.startScreencast`,
 * every frame acknowledged with `Page.screencastFrameAck`) fanned out to viewer WebSockets, and
 * the viewers' mouse and keyboard sent back to the tab through `Input.*`.
 *
 * Wire protocol of the viewer socket (`/stream/<id>/ws?token=…`):
 * - server → viewer, text: `{"type":"size","width":w,"height":h}` (page size in CSS pixels,
 *   before the frames that follow) and `{"type":"status","text":…}`; binary: one JPEG frame.
 * - viewer → server, text: `{"type":"mouse",…}`, `{"type":"key",…}`, `{"type":"text",…}`
 *   (see `ViewerMessage`). Anything else closes the socket with 1003.
 *
 * The screencast runs only while someone watches. The last frame is kept so that a viewer who
 * connects to a page that is not repainting still sees it at once. A viewer that reads slowly
 * skips frames and gets the latest one when it catches up.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { z } from 'zod';
import { MOUSE_BUTTONS } from '../../api/index.js';
import { refuseUpgrade, serverError } from '../errors.js';
import type { Logger } from '../instances/runtime.js';
import type { CdpComputer, PageTarget } from './input.js';
import { unmaskAsReceived } from './unmask.js';

export interface ScreencastOptions {
  /** The active tab; it may change (new tabs, browser restarted) and may throw (no browser). */
  page(): Promise<PageTarget>;
  /** Where viewer input goes, so that it shares the pointer with `computer` actions. */
  input: CdpComputer;
  /** Largest frame size `[width, height]` in pixels (the viewport). */
  resolution: readonly [number, number];
  log: Logger;
  /** JPEG quality 0–100. Default 75. */
  quality?: number;
}

/** How often the active tab is looked up while someone watches, in ms. */
const FOLLOW_INTERVAL_MS = 1_000;
/** Longest message a viewer sends (an input event is a few hundred bytes). */
const VIEWER_MAX_PAYLOAD = 64 * 1024;

const int = z.number().int().min(-100_000).max(100_000);
const modifiers = z.number().int().min(0).max(15).optional();
const MouseMessage = z.strictObject({
  type: z.literal('mouse'),
  event: z.enum(['mousePressed', 'mouseReleased', 'mouseMoved', 'mouseWheel']),
  x: z.number().finite(),
  y: z.number().finite(),
  button: z.enum([...MOUSE_BUTTONS, 'none']).optional(),
  buttons: z.number().int().min(0).max(31).optional(),
  clickCount: z.number().int().min(0).max(10).optional(),
  deltaX: z.number().finite().min(-100_000).max(100_000).optional(),
  deltaY: z.number().finite().min(-100_000).max(100_000).optional(),
  modifiers,
});
const KeyMessage = z.strictObject({
  type: z.literal('key'),
  event: z.enum(['keyDown', 'keyUp']),
  key: z.string().max(64),
  code: z.string().max(64),
  keyCode: int,
  location: z.number().int().min(0).max(3).optional(),
  modifiers,
  repeat: z.boolean().optional(),
});
const TextMessage = z.strictObject({ type: z.literal('text'), text: z.string().max(10_000) });
/** What a viewer may send. */
export const ViewerMessage = z.discriminatedUnion('type', [MouseMessage, KeyMessage, TextMessage]);
export type ViewerMessage = z.output<typeof ViewerMessage>;

interface Frame {
  jpeg: Buffer;
  width: number;
  height: number;
}

/**
 * Input events from viewers the server holds while the page takes in those before them: one
 * viewer's 100,000 events of 10 KB, queued without a bound, took 1 GB of the server (issue 35).
 */
export const MAX_WAITING_INPUTS = 64;

interface Viewer {
  ws: WebSocket;
  /** A frame is being written to this viewer. */
  busy: boolean;
  /** A newer frame arrived while busy. */
  behind: boolean;
  /** Size last announced to this viewer. */
  size: string;
}

interface Cast {
  page: PageTarget;
  off: () => void;
}

export class Screencast {
  readonly #opts: ScreencastOptions;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: VIEWER_MAX_PAYLOAD,
  });
  readonly #viewers = new Set<Viewer>();
  #cast: Cast | undefined;
  #frame: Frame | undefined;
  #follow: NodeJS.Timeout | undefined;
  /** The running follow step, so that steps never overlap. */
  #following: Promise<void> | undefined;
  #closed = false;
  #inputTail: Promise<void> = Promise.resolve();
  /** Viewers' input events waiting for their turn; past `MAX_WAITING_INPUTS` viewers are not read. */
  #waitingInputs = 0;
  #inputPaused = false;

  constructor(opts: ScreencastOptions) {
    this.#opts = opts;
  }

  /** Accept a viewer WebSocket (token already checked). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    if (this.#closed) return refuseUpgrade(socket, serverError('live_view_closed'));
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      // frames unmasked as they come, pieces of a message copied and charged (unmask.ts)
      unmaskAsReceived(ws, VIEWER_MAX_PAYLOAD);
      this.#add(ws);
    });
  }

  /** Disconnect every viewer and stop the screencast. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const v of this.#viewers) v.ws.terminate();
    this.#viewers.clear();
    await this.#stopCast();
  }

  #add(ws: WebSocket): void {
    if (this.#closed) return ws.terminate();
    const viewer: Viewer = { ws, busy: false, behind: false, size: '' };
    this.#viewers.add(viewer);
    ws.on('error', () => ws.terminate());
    ws.on('close', () => {
      this.#viewers.delete(viewer);
      if (this.#viewers.size === 0) void this.#idle();
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return ws.close(1003, 'text messages only');
      let msg: ViewerMessage;
      try {
        msg = ViewerMessage.parse(JSON.parse(data.toString()));
      } catch {
        return ws.close(1003, 'unexpected message');
      }
      // one event at a time, in the order the viewers sent them; a viewer sending faster than
      // the page takes them in is no longer read (its socket, then the kernel's buffers, hold
      // the rest), so the events waiting in the server stay few
      this.#waitingInputs++;
      this.#pauseInput(this.#waitingInputs > MAX_WAITING_INPUTS);
      const next = this.#inputTail.then(() => this.#input(msg));
      this.#inputTail = next
        .catch((err: unknown) => this.#opts.log.debug({ err }, 'live view input failed'))
        .finally(() => {
          this.#waitingInputs--;
          if (this.#waitingInputs <= MAX_WAITING_INPUTS / 2) this.#pauseInput(false);
        });
    });
    if (this.#inputPaused) ws.pause();
    if (this.#frame) this.#send(viewer);
    this.#startFollowing();
  }

  /** Stop (or start again) reading every viewer's socket. */
  #pauseInput(paused: boolean): void {
    if (this.#inputPaused === paused) return;
    this.#inputPaused = paused;
    for (const v of this.#viewers) {
      if (paused) v.ws.pause();
      else v.ws.resume();
    }
  }

  #startFollowing(): void {
    if (this.#follow) return;
    this.#follow = setInterval(() => void this.#step(), FOLLOW_INTERVAL_MS);
    this.#follow.unref();
    void this.#step();
  }

  /** No one watches any more: stop following and stop the screencast (keep the last frame). */
  async #idle(): Promise<void> {
    clearInterval(this.#follow);
    this.#follow = undefined;
    await this.#following;
    if (this.#viewers.size === 0) await this.#stopCast();
    else this.#startFollowing();
  }

  /** Make sure the screencast runs on the active tab. */
  #step(): Promise<void> {
    this.#following ??= (async () => {
      try {
        let page: PageTarget | undefined;
        try {
          page = await this.#opts.page();
        } catch (err) {
          this.#status((err as Error).message);
        }
        const cur = this.#cast?.page;
        if (
          page &&
          cur &&
          page.cdp === cur.cdp &&
          page.sessionId === cur.sessionId &&
          page.cdp.isOpen
        )
          return;
        await this.#stopCast();
        if (page && this.#viewers.size > 0 && !this.#closed) await this.#startCast(page);
      } finally {
        this.#following = undefined;
      }
    })();
    return this.#following;
  }

  async #startCast(page: PageTarget): Promise<void> {
    const { cdp, sessionId } = page;
    const off = cdp.on('Page.screencastFrame', (params, sid) => {
      if (sid !== sessionId) return;
      void cdp
        .send('Page.screencastFrameAck', { sessionId: params.sessionId }, sessionId)
        .catch(() => undefined);
      const meta = (params.metadata ?? {}) as { deviceWidth?: number; deviceHeight?: number };
      const jpeg = Buffer.from(String(params.data), 'base64');
      const [w, h] = this.#opts.resolution;
      this.#frame = {
        jpeg,
        width: Math.round(meta.deviceWidth ?? w),
        height: Math.round(meta.deviceHeight ?? h),
      };
      for (const v of this.#viewers) this.#send(v);
    });
    this.#cast = { page, off };
    this.#frame = undefined; // a frame of another tab would mislead
    const [maxWidth, maxHeight] = this.#opts.resolution;
    try {
      await cdp.send(
        'Page.startScreencast',
        {
          format: 'jpeg',
          quality: this.#opts.quality ?? 75,
          maxWidth,
          maxHeight,
          everyNthFrame: 1,
        },
        sessionId,
      );
      this.#status('');
    } catch (err) {
      this.#opts.log.debug({ err }, 'screencast did not start');
      off();
      this.#cast = undefined;
    }
  }

  async #stopCast(): Promise<void> {
    const cast = this.#cast;
    this.#cast = undefined;
    if (!cast) return;
    cast.off();
    if (cast.page.cdp.isOpen) {
      await cast.page.cdp
        .send('Page.stopScreencast', {}, cast.page.sessionId, 5_000)
        .catch(() => undefined);
    }
  }

  /** Write the latest frame to a viewer unless it is still reading the previous one. */
  #send(v: Viewer): void {
    const frame = this.#frame;
    if (!frame || v.ws.readyState !== WebSocket.OPEN) return;
    if (v.busy) {
      v.behind = true;
      return;
    }
    v.busy = true;
    v.behind = false;
    const size = `${frame.width}x${frame.height}`;
    if (v.size !== size) {
      v.size = size;
      v.ws.send(JSON.stringify({ type: 'size', width: frame.width, height: frame.height }));
    }
    v.ws.send(frame.jpeg, { binary: true }, () => {
      v.busy = false;
      if (v.behind) this.#send(v);
    });
  }

  #status(text: string): void {
    const msg = JSON.stringify({ type: 'status', text });
    for (const v of this.#viewers) if (v.ws.readyState === WebSocket.OPEN) v.ws.send(msg);
  }

  async #input(msg: ViewerMessage): Promise<void> {
    const input = this.#opts.input;
    // the tab being shown (looked up once a second), not a fresh lookup per mouse move
    const cast = this.#cast?.page;
    const page = cast?.cdp.isOpen ? cast : await this.#opts.page();
    switch (msg.type) {
      case 'mouse': {
        const { event, type: _, ...rest } = msg;
        await input.dispatchMouse({ ...rest, type: event }, page);
        return;
      }
      case 'key':
        await input.dispatchKey(
          {
            type: msg.event,
            key: msg.key,
            code: msg.code,
            keyCode: msg.keyCode,
            modifiers: msg.modifiers ?? 0,
            ...(msg.location !== undefined && { location: msg.location }),
            ...(msg.repeat !== undefined && { autoRepeat: msg.repeat }),
          },
          page,
        );
        return;
      case 'text':
        await input.insertText(msg.text, page);
        return;
    }
  }
}
