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
  /** Empty while a dialog is open (the page runs no script until it is answered). */
  snapshot: string;
  /** Dialogs and file choosers waiting for an answer, as lines for the agent. */
  modal: string[];
}

/** A dialog or file chooser the page opened and nobody answered yet. */
export type ModalState =
  | { kind: 'dialog'; type: string; message: string; defaultPrompt: string }
  | { kind: 'fileChooser'; backendNodeId: number; multiple: boolean };

export interface ConsoleMessage {
  type: string;
  text: string;
}

export interface NetworkRequest {
  method: string;
  url: string;
  resourceType: string;
  status?: number;
  statusText?: string;
  failure?: string;
  /** The document load it belongs to (CDP `loaderId`). */
  loaderId?: string;
}

/** What is kept per tab of console messages and requests (the oldest go first). */
const MAX_LOG_ENTRIES = 1000;

/** What a tab has seen since burrow attached to it. */
interface TabRecord {
  /** The tab's target id, which is also the id of its main frame. */
  targetId: string;
  sessionId: string;
  console: ConsoleMessage[];
  requests: Map<string, NetworkRequest>;
  modal: ModalState[];
  /** Called when a dialog opens, so an action that opened it stops waiting for itself. */
  onDialog: Set<() => void>;
}

/** Forget what the tab's earlier pages did; the requests of `keepLoader` (the new page's) stay. */
const clearRecord = (tab: TabRecord, keepLoader?: string) => {
  tab.console.length = 0;
  for (const [id, r] of tab.requests)
    if (!keepLoader || r.loaderId !== keepLoader) tab.requests.delete(id);
};

const push = <T>(list: T[], item: T) => {
  list.push(item);
  if (list.length > MAX_LOG_ENTRIES) list.splice(0, list.length - MAX_LOG_ENTRIES);
};

export class PageTools {
  readonly #cdp: CdpConnection;
  #targetId = '';
  #sessionId = '';
  /** Target ids of the tabs, oldest first: the indices of `browser_tabs`. */
  #order: string[] = [];
  /** ref → backendDOMNodeId, from the last snapshot of the current tab. */
  #refs = new Map<string, number>();
  /** targetId → what burrow recorded of the tab (one attached session per tab). */
  readonly #tabs = new Map<string, TabRecord>();

  private constructor(cdp: CdpConnection) {
    this.#cdp = cdp;
    const tabOf = (sid: string | undefined) =>
      [...this.#tabs.values()].find((t) => t.sessionId === sid);
    const on = (method: string, fn: (p: Record<string, unknown>, tab: TabRecord) => void) =>
      cdp.on(method, (p, sid) => {
        const tab = tabOf(sid);
        if (tab) fn(p as Record<string, unknown>, tab);
      });
    on('Runtime.consoleAPICalled', (p, tab) => {
      const args = (p.args as { value?: unknown; description?: string; type: string }[]) ?? [];
      const text = args
        .map((a) =>
          a.value !== undefined
            ? typeof a.value === 'string'
              ? a.value
              : JSON.stringify(a.value)
            : (a.description ?? a.type),
        )
        .join(' ');
      push(tab.console, { type: String(p.type), text });
    });
    on('Runtime.exceptionThrown', (p, tab) => {
      const d = p.exceptionDetails as { text?: string; exception?: { description?: string } };
      push(tab.console, { type: 'error', text: d.exception?.description ?? d.text ?? 'error' });
    });
    on('Network.requestWillBeSent', (p, tab) => {
      const request = p.request as { method: string; url: string };
      tab.requests.set(String(p.requestId), {
        method: request.method,
        url: request.url,
        resourceType: String(p.type ?? 'Other'),
        ...(typeof p.loaderId === 'string' ? { loaderId: p.loaderId } : {}),
      });
      if (tab.requests.size > MAX_LOG_ENTRIES) {
        tab.requests.delete(tab.requests.keys().next().value!);
      }
    });
    on('Network.responseReceived', (p, tab) => {
      const r = tab.requests.get(String(p.requestId));
      const response = p.response as { status: number; statusText: string };
      if (r) Object.assign(r, { status: response.status, statusText: response.statusText });
    });
    on('Network.loadingFailed', (p, tab) => {
      const r = tab.requests.get(String(p.requestId));
      if (r) r.failure = String(p.errorText);
    });
    // Like Playwright MCP, a tab's console messages and requests are those of the page it shows:
    // a navigation of its main frame (a new document or a history change) starts them afresh.
    on('Page.frameNavigated', (p, tab) => {
      const frame = p.frame as { parentId?: string; loaderId?: string } | undefined;
      if (frame && !frame.parentId) clearRecord(tab, frame.loaderId);
    });
    on('Page.navigatedWithinDocument', (p, tab) => {
      if (p.frameId === tab.targetId) clearRecord(tab, undefined);
    });
    on('Page.javascriptDialogOpening', (p, tab) => {
      tab.modal.push({
        kind: 'dialog',
        type: String(p.type),
        message: String(p.message),
        defaultPrompt: String(p.defaultPrompt ?? ''),
      });
      for (const fn of tab.onDialog) fn();
    });
    on('Page.javascriptDialogClosed', (_p, tab) => {
      tab.modal = tab.modal.filter((m) => m.kind !== 'dialog');
    });
    on('Page.fileChooserOpened', (p, tab) => {
      if (typeof p.backendNodeId !== 'number') return;
      tab.modal = tab.modal.filter((m) => m.kind !== 'fileChooser');
      tab.modal.push({
        kind: 'fileChooser',
        backendNodeId: p.backendNodeId,
        multiple: p.mode === 'selectMultiple',
      });
    });
    cdp.on('Target.detachedFromTarget', (p) => {
      const sid = (p as { sessionId?: string }).sessionId;
      for (const [id, t] of this.#tabs) if (t.sessionId === sid) this.#tabs.delete(id);
    });
  }

  /** The record of the current tab. */
  get #tab(): TabRecord {
    return this.#tabs.get(this.#targetId)!;
  }

  /** Dialogs and file choosers of the current tab waiting for an answer. */
  get modal(): readonly ModalState[] {
    return this.#tabs.get(this.#targetId)?.modal ?? [];
  }

  /** Refuses to act on a tab whose dialog waits for an answer (it runs nothing until then). */
  assertNoDialog(): void {
    const d = this.modal.find((m) => m.kind === 'dialog');
    if (d) {
      throw fail(
        `A ${d.type} dialog is open ("${d.message}"); answer it with browser_handle_dialog first`,
        'modal_state',
      );
    }
  }

  /**
   * Runs an action; should it open a dialog, stops waiting for it (the page is blocked until the
   * dialog is answered) and leaves the dialog in the modal state.
   */
  async #act<T>(run: () => Promise<T>): Promise<T | undefined> {
    const tab = this.#tab;
    let onDialog!: () => void;
    const opened = new Promise<undefined>((resolve) => (onDialog = () => resolve(undefined)));
    tab.onDialog.add(onDialog);
    try {
      const work = run();
      work.catch(() => undefined);
      return await Promise.race([work, opened]);
    } finally {
      tab.onDialog.delete(onDialog);
    }
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
    const known = this.#tabs.get(targetId);
    this.#refs = new Map();
    if (known) {
      this.#targetId = targetId;
      this.#sessionId = known.sessionId;
    } else {
      const { sessionId } = await this.#cdp.send<{ sessionId: string }>('Target.attachToTarget', {
        targetId,
        flatten: true,
      });
      this.#tabs.set(targetId, {
        targetId,
        sessionId,
        console: [],
        requests: new Map(),
        modal: [],
        onDialog: new Set(),
      });
      this.#targetId = targetId;
      this.#sessionId = sessionId;
      await this.#send('Page.enable');
      await this.#send('DOM.enable');
      await this.#send('Runtime.enable');
      await this.#send('Network.enable');
      await this.#send('Page.setInterceptFileChooserDialog', { enabled: true });
    }
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

  /** Navigates the tab; a dialog the old page opens (`beforeunload`) ends the wait (`#act`). */
  async navigate(url: string): Promise<void> {
    await this.#act(() => this.#navigate(url));
  }

  async #navigate(url: string): Promise<void> {
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
    await this.#act(async () => {
      const nav = this.#watchNavigation();
      await this.#send('Page.navigateToHistoryEntry', { entryId: entry.id });
      await nav.settle({ timeoutMs: NAV_TIMEOUT_MS });
    });
  }

  async state(): Promise<PageState> {
    const modal = this.modal.map(describeModal);
    if (this.modal.some((m) => m.kind === 'dialog')) {
      // the page runs no script while a dialog is open: what the browser knows of the tab
      const { targetInfo } = await this.#cdp.send<{ targetInfo: TargetInfo }>(
        'Target.getTargetInfo',
        { targetId: this.#targetId },
      );
      return { url: targetInfo.url, title: targetInfo.title, snapshot: '', modal };
    }
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
    return { ...info, snapshot: snap.text, modal };
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
    await this.#act(async () => {
      const nav = this.#watchNavigation();
      await this.#mouse('mouseMoved', x, y, { modifiers });
      const clicks = opts.doubleClick ? 2 : 1;
      for (let clickCount = 1; clickCount <= clicks; clickCount++) {
        const common = { button, clickCount, modifiers };
        await this.#mouse('mousePressed', x, y, common);
        await this.#mouse('mouseReleased', x, y, common);
      }
      await nav.settle();
    });
  }

  async hover(ref: string): Promise<void> {
    const { x, y } = await this.#element(ref);
    await this.#act(() => this.#mouse('mouseMoved', x, y));
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
    await this.pressKey('Enter');
  }

  /**
   * Presses a key, Playwright-style: a key name (`Enter`, `ArrowLeft`, `Backspace`…) or one
   * character, with modifiers joined by `+` (`Control+a`, `Shift+Tab`), on the focused element.
   */
  async pressKey(key: string): Promise<void> {
    const parts = key === '+' ? ['+'] : key.split('+');
    const main = parts.pop() || '+';
    const mods = modifierBits(parts);
    if (parts.some((m) => modifierBits([m]) === 0)) {
      throw fail(`Unknown modifier in ${JSON.stringify(key)}`, 'validation_error');
    }
    const def = keyDefinition(main);
    if (!def) throw fail(`Unknown key ${JSON.stringify(main)}`, 'validation_error');
    // a character is typed unless Control, Alt or Meta turn the press into a shortcut
    const text = def.text !== undefined && (mods & 7) === 0 ? def.text : undefined;
    const base = {
      key: def.key,
      code: def.code,
      windowsVirtualKeyCode: def.keyCode,
      modifiers: mods,
    };
    await this.#act(async () => {
      const nav = this.#watchNavigation();
      await this.#send('Input.dispatchKeyEvent', {
        type: text !== undefined ? 'keyDown' : 'rawKeyDown',
        ...base,
        ...(text !== undefined && { text, unmodifiedText: text }),
      });
      await this.#send('Input.dispatchKeyEvent', { type: 'keyUp', ...base });
      await nav.settle();
    });
  }

  /**
   * Drags the element of `from` onto the element of `to` with the left button held: mouse
   * events, and when the page starts an HTML5 drag (Chromium hands it over, intercepted, instead
   * of running its own drag loop) the drag events of that drag, ending with a drop.
   */
  async drag(from: string, to: string): Promise<void> {
    const a = await this.#element(from);
    const b = await this.#element(to);
    const sid = this.#sessionId;
    let data: unknown;
    const off = this.#cdp.on('Input.dragIntercepted', (p, s) => {
      if (s === sid) data = (p as { data: unknown }).data;
    });
    const dragEvent = (type: string, x: number, y: number) =>
      this.#send('Input.dispatchDragEvent', { type, x, y, data });
    try {
      await this.#send('Input.setInterceptDrags', { enabled: true });
      await this.#act(async () => {
        await this.#mouse('mouseMoved', a.x, a.y);
        await this.#mouse('mousePressed', a.x, a.y, { button: 'left', clickCount: 1, buttons: 1 });
        const steps = 8;
        let entered = false;
        for (let i = 1; i <= steps; i++) {
          const x = a.x + ((b.x - a.x) * i) / steps;
          const y = a.y + ((b.y - a.y) * i) / steps;
          if (data === undefined) {
            await this.#mouse('mouseMoved', x, y, { button: 'left', buttons: 1 });
          } else {
            if (!entered) await dragEvent('dragEnter', x, y);
            entered = true;
            await dragEvent('dragOver', x, y);
          }
        }
        if (data !== undefined) {
          if (!entered) await dragEvent('dragEnter', b.x, b.y);
          await dragEvent('drop', b.x, b.y);
        }
        await this.#mouse('mouseReleased', b.x, b.y, {
          button: 'left',
          clickCount: 1,
          buttons: 0,
        });
      });
    } finally {
      off();
      await this.#send('Input.setInterceptDrags', { enabled: false }).catch(() => undefined);
    }
  }

  /**
   * Sets one field of a form as a person would: a textbox gets the text, a checkbox is clicked
   * when its state differs from `value` ("true"/"false"), a radio is clicked, a combobox
   * selects the option, a slider takes the value.
   */
  async fill(field: { type: string; ref: string; value: string }): Promise<void> {
    if (field.type === 'textbox') return this.type(field.ref, field.value, false);
    if (field.type === 'combobox') {
      await this.selectOption(field.ref, [field.value]);
      return;
    }
    const objectId = await this.#objectOf(field.ref);
    if (field.type === 'slider') {
      await this.#callOn(
        objectId,
        `function (value) {
          this.focus();
          this.value = value;
          this.dispatchEvent(new Event('input', { bubbles: true }));
          this.dispatchEvent(new Event('change', { bubbles: true }));
        }`,
        [field.value],
      );
      return;
    }
    const checked = await this.#callOn<boolean>(objectId, 'function () { return !!this.checked; }');
    const want = field.type === 'radio' ? true : field.value === 'true';
    if (checked !== want) await this.click(field.ref, {});
  }

  /** The viewport of the current tab, as Playwright's `setViewportSize` sets it. */
  async resize(width: number, height: number): Promise<void> {
    await this.#send('Emulation.setDeviceMetricsOverride', {
      width,
      height,
      deviceScaleFactor: 0,
      mobile: false,
    });
  }

  /** Answers the open dialog of the current tab. */
  async handleDialog(accept: boolean, promptText: string | undefined): Promise<void> {
    const dialog = this.modal.find((m) => m.kind === 'dialog');
    if (!dialog) throw fail('No dialog is open', 'no_modal_state');
    const tab = this.#tab;
    tab.modal = tab.modal.filter((m) => m !== dialog);
    await this.#act(async () => {
      const nav = this.#watchNavigation();
      await this.#send('Page.handleJavaScriptDialog', {
        accept,
        ...(promptText !== undefined && { promptText }),
      });
      await nav.settle();
    });
  }

  /**
   * Answers the open file chooser of the current tab with files on the instance (paths as its
   * browser sees them); no paths cancels it.
   */
  async uploadFiles(paths: readonly string[] | undefined): Promise<void> {
    const chooser = this.modal.find((m) => m.kind === 'fileChooser');
    if (!chooser || chooser.kind !== 'fileChooser') {
      throw fail('No file chooser is open: click the file input first', 'no_modal_state');
    }
    if (paths && paths.length > 1 && !chooser.multiple) {
      throw fail('This file input takes one file', 'validation_error');
    }
    const tab = this.#tab;
    tab.modal = tab.modal.filter((m) => m !== chooser);
    if (!paths || paths.length === 0) return;
    try {
      await this.#send('DOM.setFileInputFiles', {
        files: [...paths],
        backendNodeId: chooser.backendNodeId,
      });
    } catch (err) {
      throw fail(
        `Cannot set the files: ${err instanceof Error ? err.message : String(err)}`,
        'upload_failed',
      );
    }
  }

  /** Console messages of the current tab since burrow attached to it, oldest first. */
  consoleMessages(): readonly ConsoleMessage[] {
    return this.#tab.console;
  }

  /** Requests of the page the current tab shows (its document's included), oldest first. */
  networkRequests(): NetworkRequest[] {
    return [...this.#tab.requests.values()];
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
      return this.#act(() =>
        this.#callOn(
          objectId,
          `async function () { const f = (${fn}); return typeof f === 'function' ? await f(this) : f; }`,
        ),
      );
    }
    return this.#act(() =>
      this.#eval(
        `(async () => { const f = (${fn}); return typeof f === 'function' ? await f() : f; })()`,
        NAV_TIMEOUT_MS,
      ),
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

interface KeyDefinition {
  key: string;
  code: string;
  keyCode: number;
  text?: string;
}

/** Named keys of Playwright's vocabulary: [code, Windows virtual key code, text]. */
const NAMED_KEYS: Record<string, [string, number, string?]> = {
  Enter: ['Enter', 13, '\r'],
  Tab: ['Tab', 9, '\t'],
  Backspace: ['Backspace', 8],
  Delete: ['Delete', 46],
  Escape: ['Escape', 27],
  ArrowLeft: ['ArrowLeft', 37],
  ArrowUp: ['ArrowUp', 38],
  ArrowRight: ['ArrowRight', 39],
  ArrowDown: ['ArrowDown', 40],
  Home: ['Home', 36],
  End: ['End', 35],
  PageUp: ['PageUp', 33],
  PageDown: ['PageDown', 34],
  Insert: ['Insert', 45],
  Space: ['Space', 32, ' '],
  Shift: ['ShiftLeft', 16],
  Control: ['ControlLeft', 17],
  Alt: ['AltLeft', 18],
  Meta: ['MetaLeft', 91],
};
for (let n = 1; n <= 12; n++) NAMED_KEYS[`F${n}`] = [`F${n}`, 111 + n];

/** The CDP fields of a key name or single character, or undefined when it is neither. */
function keyDefinition(name: string): KeyDefinition | undefined {
  const named = NAMED_KEYS[name];
  if (named) {
    const [code, keyCode, text] = named;
    return {
      key: name === 'Space' ? ' ' : name,
      code,
      keyCode,
      ...(text !== undefined && { text }),
    };
  }
  if ([...name].length !== 1) return undefined;
  const upper = name.toUpperCase();
  const letter = /^[A-Z]$/.test(upper);
  const digit = /^[0-9]$/.test(name);
  return {
    key: name,
    code: letter ? `Key${upper}` : digit ? `Digit${name}` : name === ' ' ? 'Space' : '',
    keyCode: letter || digit ? upper.charCodeAt(0) : name === ' ' ? 32 : 0,
    text: name,
  };
}

/** A modal state as the line the agent reads, naming the tool that answers it. */
function describeModal(m: ModalState): string {
  return m.kind === 'dialog'
    ? `- [${m.type} dialog with message ${JSON.stringify(m.message)}${m.type === 'prompt' ? ` and default ${JSON.stringify(m.defaultPrompt)}` : ''}]: answer it with browser_handle_dialog`
    : `- [File chooser${m.multiple ? ' (several files)' : ''}]: answer it with browser_file_upload`;
}
