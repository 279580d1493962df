/**
 * The browser tools of one instance (`browser_*` in tools.ts) over raw CDP: one DevTools
 * connection to the instance's browser (through the token-checked relay), the tab the agent
 * works in attached with a flattened session, and the element references of the last snapshot.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { raceDeadline, until } from '../../internal/deadline.js';
import { CdpConnection, type CdpParams } from '../chromium/cdp.js';
import { McpToolFailure } from './backend.js';
import { renderSnapshot, type AXNode } from './snapshot.js';

interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
  title: string;
}

/** Longest wait of a navigation or `browser_wait_for`, in ms. */
const NAV_TIMEOUT_MS = 30_000;
/** How long after an action a navigation it started is waited for, in ms. */
const ACTION_NAV_TIMEOUT_MS = 10_000;
/** How soon after an action a navigation must start to count as started by it, in ms. */
const NAV_GRACE_MS = 150;
const WAIT_TIMEOUT_MS = 30_000;

const fail = (message: string, code: string) => new McpToolFailure(message, code);

export interface PageState {
  url: string;
  title: string;
  snapshot: string;
}

export class PageTools {
  readonly #cdp: CdpConnection;
  #targetId = '';
  #sessionId = '';
  /** Target ids of the tabs, oldest first: the indices of `browser_tabs`. */
  #order: string[] = [];
  /** ref → backendDOMNodeId, from the last snapshot of the current tab. */
  #refs = new Map<string, number>();

  private constructor(cdp: CdpConnection) {
    this.#cdp = cdp;
  }

  /** Connects to a DevTools endpoint and attaches to its first tab (opening one if none). */
  static async open(cdpUrl: string): Promise<PageTools> {
    const cdp = await CdpConnection.connect(cdpUrl);
    const tools = new PageTools(cdp);
    try {
      const pages = await tools.#pages();
      const first = pages[0]?.targetId ?? (await tools.#newTarget());
      await tools.#select(first);
      return tools;
    } catch (err) {
      cdp.close();
      throw err;
    }
  }

  get isOpen(): boolean {
    return this.#cdp.isOpen;
  }

  close(): void {
    this.#cdp.close('the MCP session ended');
  }

  /** The tabs in the order they were first seen (CDP lists targets in no stable order). */
  async #pages(): Promise<TargetInfo[]> {
    const { targetInfos } = await this.#cdp.send<{ targetInfos: TargetInfo[] }>(
      'Target.getTargets',
    );
    const pages = targetInfos.filter((t) => t.type === 'page');
    const live = new Set(pages.map((p) => p.targetId));
    this.#order = this.#order.filter((id) => live.has(id));
    for (const p of pages) if (!this.#order.includes(p.targetId)) this.#order.push(p.targetId);
    return pages.sort((a, b) => this.#order.indexOf(a.targetId) - this.#order.indexOf(b.targetId));
  }

  async #newTarget(url = 'about:blank'): Promise<string> {
    const { targetId } = await this.#cdp.send<{ targetId: string }>('Target.createTarget', { url });
    if (!this.#order.includes(targetId)) this.#order.push(targetId);
    return targetId;
  }

  async #select(targetId: string): Promise<void> {
    const { sessionId } = await this.#cdp.send<{ sessionId: string }>('Target.attachToTarget', {
      targetId,
      flatten: true,
    });
    this.#targetId = targetId;
    this.#sessionId = sessionId;
    this.#refs = new Map();
    await this.#send('Page.enable');
    await this.#send('DOM.enable');
    await this.#cdp.send('Target.activateTarget', { targetId }).catch(() => undefined);
  }

  #send<T = CdpParams>(method: string, params: CdpParams = {}, timeoutMs?: number): Promise<T> {
    return this.#cdp.send<T>(method, params, this.#sessionId, timeoutMs);
  }

  /** Evaluates `expression` in the page; the value, by value. */
  async #eval<T>(expression: string, timeoutMs?: number): Promise<T> {
    const r = await this.#send<{
      result: { value?: T };
      exceptionDetails?: { text?: string; exception?: { description?: string } };
    }>('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, timeoutMs);
    if (r.exceptionDetails) {
      throw fail(
        `JavaScript error: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text ?? 'unknown'}`,
        'javascript_error',
      );
    }
    return r.result.value as T;
  }

  /**
   * Watches the tab for a navigation an action may start. `settle()` then waits: a navigation that
   * began within a short grace period (or `expect`ed) must finish loading, up to `timeoutMs`.
   */
  #watchNavigation(): { settle(opts?: { expect?: boolean; timeoutMs?: number }): Promise<void> } {
    const sid = this.#sessionId;
    let started = false;
    let onStopped!: () => void;
    const stopped = new Promise<void>((resolve) => (onStopped = resolve));
    const offs = [
      this.#cdp.on('Page.frameStartedLoading', (_p, s) => {
        if (s === sid) started = true;
      }),
      this.#cdp.on('Page.frameStoppedLoading', (_p, s) => {
        if (s === sid && started) onStopped();
      }),
    ];
    return {
      settle: async ({ expect = false, timeoutMs = ACTION_NAV_TIMEOUT_MS } = {}) => {
        try {
          if (!started) await sleep(NAV_GRACE_MS);
          if (!started && !expect) return;
          await raceDeadline(stopped, timeoutMs);
        } finally {
          for (const off of offs) off();
        }
      },
    };
  }

  async navigate(url: string): Promise<void> {
    const nav = this.#watchNavigation();
    const r = await this.#send<{ errorText?: string; loaderId?: string }>(
      'Page.navigate',
      { url },
      NAV_TIMEOUT_MS,
    );
    if (r.errorText) {
      await nav.settle();
      throw fail(`Navigation to ${url} failed: ${r.errorText}`, 'navigation_failed');
    }
    await nav.settle({ expect: r.loaderId !== undefined, timeoutMs: NAV_TIMEOUT_MS });
  }

  async back(): Promise<void> {
    const { currentIndex, entries } = await this.#send<{
      currentIndex: number;
      entries: { id: number }[];
    }>('Page.getNavigationHistory');
    const entry = entries[currentIndex - 1];
    if (!entry) throw fail('There is no previous page in this tab', 'no_history');
    const nav = this.#watchNavigation();
    await this.#send('Page.navigateToHistoryEntry', { entryId: entry.id });
    await nav.settle({ timeoutMs: NAV_TIMEOUT_MS });
  }

  async state(): Promise<PageState> {
    const { nodes } = await this.#send<{ nodes: AXNode[] }>(
      'Accessibility.getFullAXTree',
      {},
      30_000,
    );
    const snap = renderSnapshot(nodes);
    this.#refs = snap.refs;
    const info = await this.#eval<{ url: string; title: string }>(
      '({ url: location.href, title: document.title })',
    );
    return { ...info, snapshot: snap.text };
  }

  /** The DOM node of `ref`, scrolled into view, with the centre of its box. */
  async #element(ref: string): Promise<{ backendNodeId: number; x: number; y: number }> {
    const backendNodeId = this.#refs.get(ref);
    if (backendNodeId === undefined) {
      throw fail(
        `Ref ${ref} not found in the current page snapshot. Take a new snapshot with browser_snapshot.`,
        'ref_not_found',
      );
    }
    await this.#send('DOM.scrollIntoViewIfNeeded', { backendNodeId }).catch(() => undefined);
    let quads: number[][];
    try {
      ({ quads } = await this.#send<{ quads: number[][] }>('DOM.getContentQuads', {
        backendNodeId,
      }));
    } catch {
      throw fail(`Element ${ref} is no longer in the page; take a new snapshot`, 'ref_stale');
    }
    const q = quads[0];
    if (!q) throw fail(`Element ${ref} is not visible`, 'element_not_visible');
    const x = (q[0]! + q[2]! + q[4]! + q[6]!) / 4;
    const y = (q[1]! + q[3]! + q[5]! + q[7]!) / 4;
    return { backendNodeId, x, y };
  }

  async #objectOf(ref: string): Promise<string> {
    const { backendNodeId } = await this.#element(ref);
    const { object } = await this.#send<{ object: { objectId: string } }>('DOM.resolveNode', {
      backendNodeId,
    });
    return object.objectId;
  }

  async #callOn<T>(objectId: string, fn: string, args: unknown[] = []): Promise<T> {
    const r = await this.#send<{
      result: { value?: T };
      exceptionDetails?: { exception?: { description?: string }; text?: string };
    }>('Runtime.callFunctionOn', {
      objectId,
      functionDeclaration: fn,
      arguments: args.map((value) => ({ value })),
      returnByValue: true,
      awaitPromise: true,
    });
    if (r.exceptionDetails) {
      throw fail(
        `JavaScript error: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text ?? 'unknown'}`,
        'javascript_error',
      );
    }
    return r.result.value as T;
  }

  async #mouse(type: string, x: number, y: number, extra: CdpParams = {}): Promise<void> {
    await this.#send('Input.dispatchMouseEvent', { type, x, y, ...extra });
  }

  async click(
    ref: string,
    opts: { button?: 'left' | 'right' | 'middle'; doubleClick?: boolean; modifiers?: string[] },
  ): Promise<void> {
    const { x, y } = await this.#element(ref);
    const button = opts.button ?? 'left';
    const modifiers = modifierBits(opts.modifiers ?? []);
    const nav = this.#watchNavigation();
    await this.#mouse('mouseMoved', x, y, { modifiers });
    const clicks = opts.doubleClick ? 2 : 1;
    for (let clickCount = 1; clickCount <= clicks; clickCount++) {
      const common = { button, clickCount, modifiers };
      await this.#mouse('mousePressed', x, y, common);
      await this.#mouse('mouseReleased', x, y, common);
    }
    await nav.settle();
  }

  async hover(ref: string): Promise<void> {
    const { x, y } = await this.#element(ref);
    await this.#mouse('mouseMoved', x, y);
  }

  /** Replaces the element's text with `text` (as typing would), then Enter if `submit`. */
  async type(ref: string, text: string, submit: boolean): Promise<void> {
    const objectId = await this.#objectOf(ref);
    await this.#callOn(
      objectId,
      `function () {
        this.focus();
        if (this.isContentEditable) {
          const range = document.createRange();
          range.selectNodeContents(this);
          const sel = getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
        } else if (typeof this.select === 'function') {
          this.select();
        }
      }`,
    );
    if (text) await this.#send('Input.insertText', { text });
    else await this.#key('Delete', 'Delete', 46);
    if (!submit) return;
    const nav = this.#watchNavigation();
    await this.#key('Enter', 'Enter', 13, '\r');
    await nav.settle();
  }

  async #key(key: string, code: string, keyCode: number, text?: string): Promise<void> {
    const base = { key, code, windowsVirtualKeyCode: keyCode };
    await this.#send('Input.dispatchKeyEvent', {
      type: text ? 'keyDown' : 'rawKeyDown',
      ...base,
      ...(text && { text }),
    });
    await this.#send('Input.dispatchKeyEvent', { type: 'keyUp', ...base });
  }

  async selectOption(ref: string, values: string[]): Promise<string[]> {
    const objectId = await this.#objectOf(ref);
    const picked = await this.#callOn<string[] | string>(
      objectId,
      `function (values) {
        if (!(this instanceof HTMLSelectElement)) return 'not a <select> element';
        const chosen = [];
        for (const option of this.options) {
          const want = values.includes(option.value) || values.includes(option.label);
          if (want && (this.multiple || chosen.length === 0)) chosen.push(option);
        }
        if (chosen.length === 0) return 'no option matches ' + JSON.stringify(values);
        for (const option of this.options) option.selected = chosen.includes(option);
        this.dispatchEvent(new Event('input', { bubbles: true }));
        this.dispatchEvent(new Event('change', { bubbles: true }));
        return chosen.map((o) => o.value);
      }`,
      [values],
    );
    if (typeof picked === 'string') throw fail(`Cannot select: ${picked}`, 'select_failed');
    return picked;
  }

  /** Runs `fn` (a function's source, or an expression) in the page, on the element if given. */
  async evaluate(fn: string, ref: string | undefined): Promise<unknown> {
    if (ref !== undefined) {
      const objectId = await this.#objectOf(ref);
      return this.#callOn(
        objectId,
        `async function () { const f = (${fn}); return typeof f === 'function' ? await f(this) : f; }`,
      );
    }
    return this.#eval(
      `(async () => { const f = (${fn}); return typeof f === 'function' ? await f() : f; })()`,
      NAV_TIMEOUT_MS,
    );
  }

  async waitFor(opts: { text?: string; textGone?: string; time?: number }): Promise<void> {
    if (opts.time !== undefined) await sleep(Math.min(opts.time, 60) * 1000);
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    const has = (t: string) =>
      this.#eval<boolean>(`(document.body?.innerText ?? '').includes(${JSON.stringify(t)})`);
    for (const [text, present] of [
      [opts.text, true],
      [opts.textGone, false],
    ] as const) {
      if (text === undefined) continue;
      const seen = await until(async () => (await has(text).catch(() => !present)) === present, {
        timeoutMs: deadline - Date.now(),
        intervalMs: 200,
      });
      if (!seen) {
        throw fail(
          `Timed out after ${WAIT_TIMEOUT_MS / 1000} s waiting for ${JSON.stringify(text)} to ${present ? 'appear' : 'disappear'}`,
          'wait_timeout',
        );
      }
    }
  }

  async screenshot(opts: {
    type?: 'png' | 'jpeg';
    ref?: string | undefined;
    fullPage?: boolean | undefined;
  }): Promise<{ data: string; mimeType: string }> {
    const format = opts.type ?? 'png';
    const params: CdpParams = { format };
    if (opts.ref !== undefined) {
      const { backendNodeId } = await this.#element(opts.ref);
      const { model } = await this.#send<{ model: { border: number[] } }>('DOM.getBoxModel', {
        backendNodeId,
      });
      const xs = model.border.filter((_, i) => i % 2 === 0);
      const ys = model.border.filter((_, i) => i % 2 === 1);
      const x = Math.min(...xs);
      const y = Math.min(...ys);
      params.clip = { x, y, width: Math.max(...xs) - x, height: Math.max(...ys) - y, scale: 1 };
    } else if (opts.fullPage) {
      const { cssContentSize } = await this.#send<{
        cssContentSize: { width: number; height: number };
      }>('Page.getLayoutMetrics');
      params.captureBeyondViewport = true;
      params.clip = { x: 0, y: 0, ...cssContentSize, scale: 1 };
    }
    const { data } = await this.#send<{ data: string }>('Page.captureScreenshot', params, 30_000);
    return { data, mimeType: `image/${format}` };
  }

  async tabs(): Promise<{ index: number; url: string; title: string; current: boolean }[]> {
    const pages = await this.#pages();
    return pages.map((p, index) => ({
      index,
      url: p.url,
      title: p.title,
      current: p.targetId === this.#targetId,
    }));
  }

  async newTab(url?: string): Promise<void> {
    await this.#select(await this.#newTarget());
    if (url) await this.navigate(url);
  }

  async #tabAt(index: number | undefined): Promise<TargetInfo> {
    const pages = await this.#pages();
    const tab =
      index === undefined ? pages.find((p) => p.targetId === this.#targetId) : pages[index];
    if (!tab) {
      throw fail(`No tab at index ${index} (there are ${pages.length})`, 'tab_not_found');
    }
    return tab;
  }

  async selectTab(index: number): Promise<void> {
    await this.#select((await this.#tabAt(index)).targetId);
  }

  async closeTab(index: number | undefined): Promise<void> {
    const tab = await this.#tabAt(index);
    await this.#cdp.send('Target.closeTarget', { targetId: tab.targetId });
    if (tab.targetId !== this.#targetId) return;
    // the current tab closed: continue in the first remaining one (or a new blank tab)
    const rest = (await this.#pages()).filter((p) => p.targetId !== tab.targetId);
    await this.#select(rest[0]?.targetId ?? (await this.#newTarget()));
  }
}

/** CDP modifier bits of Playwright's modifier names. */
function modifierBits(names: readonly string[]): number {
  let bits = 0;
  for (const n of names) {
    if (n === 'Alt') bits |= 1;
    else if (n === 'Control' || n === 'ControlOrMeta') bits |= 2;
    else if (n === 'Meta') bits |= 4;
    else if (n === 'Shift') bits |= 8;
  }
  return bits;
}
