/**
 * The DevTools connection of one MCP session to an instance's browser (through the token-checked
 * relay) and the tab the agent works in: attached with a flattened session, what each tab has
 * seen (records.ts), the element references of the last snapshot, and the few ways every browser
 * tool talks to the page (a command on the tab's session, a script, an element by its ref, an
 * action that a dialog may interrupt). The tools' modules (tabs, navigation, input, forms, state)
 * work on this object; PageTools (../page.ts) is their face.
 */
import { abortable } from '../../../internal/deadline.js';
import type { CdpConnection, CdpParams } from '../../chromium/cdp.js';
import type { PageTarget } from '../../chromium/keyboard.js';
import { McpToolFailure } from '../backend.js';
import { recordTabs, type ModalState, type TabRecord } from './records.js';

export const fail = (message: string, code: string) => new McpToolFailure(message, code);

/** Why an action stopped waiting: its page opened a dialog (`PageConnection.act`). */
const DIALOG_OPENED = Symbol('a dialog opened');

/** What a script threw, as CDP reports it. */
interface ExceptionDetails {
  text?: string;
  exception?: { description?: string };
}

export class PageConnection {
  readonly cdp: CdpConnection;
  /** The tab the agent works in, and this connection's session on it. */
  targetId = '';
  sessionId = '';
  /** Target ids of the tabs, oldest first: the indices of `browser_tabs`. */
  order: string[] = [];
  /** ref → backendDOMNodeId, from the last snapshot of the current tab. */
  refs = new Map<string, number>();
  /** targetId → what burrow recorded of the tab (one attached session per tab). */
  readonly tabs = new Map<string, TabRecord>();

  constructor(cdp: CdpConnection) {
    this.cdp = cdp;
    recordTabs(cdp, this.tabs);
  }

  /** The record of the current tab. */
  get record(): TabRecord {
    return this.tabs.get(this.targetId)!;
  }

  /** Dialogs and file choosers of the current tab waiting for an answer. */
  get modal(): readonly ModalState[] {
    return this.tabs.get(this.targetId)?.modal ?? [];
  }

  /** The current tab as the input layer takes it (../../chromium/keyboard.ts, mouse.ts). */
  get page(): PageTarget {
    return { cdp: this.cdp, sessionId: this.sessionId };
  }

  /** A command on the current tab's session. */
  send<T = CdpParams>(method: string, params: CdpParams = {}, timeoutMs?: number): Promise<T> {
    return this.cdp.send<T>(method, params, this.sessionId, timeoutMs);
  }

  /** Evaluates `expression` in the page; the value, by value. */
  async eval<T>(expression: string, timeoutMs?: number): Promise<T> {
    const r = await this.send<{ result: { value?: T }; exceptionDetails?: ExceptionDetails }>(
      'Runtime.evaluate',
      { expression, returnByValue: true, awaitPromise: true },
      timeoutMs,
    );
    return valueOf(r);
  }

  /** Calls the function `fn` (its source) on the object `objectId` with `args`; its value. */
  async callOn<T>(objectId: string, fn: string, args: unknown[] = []): Promise<T> {
    const r = await this.send<{ result: { value?: T }; exceptionDetails?: ExceptionDetails }>(
      'Runtime.callFunctionOn',
      {
        objectId,
        functionDeclaration: fn,
        arguments: args.map((value) => ({ value })),
        returnByValue: true,
        awaitPromise: true,
      },
    );
    return valueOf(r);
  }

  /** The DOM node of `ref`, scrolled into view, with the centre of its box. */
  async element(ref: string): Promise<{ backendNodeId: number; x: number; y: number }> {
    const backendNodeId = this.refs.get(ref);
    if (backendNodeId === undefined) {
      throw fail(
        `Ref ${ref} not found in the current page snapshot. Take a new snapshot with browser_snapshot.`,
        'ref_not_found',
      );
    }
    await this.send('DOM.scrollIntoViewIfNeeded', { backendNodeId }).catch(() => undefined);
    let quads: number[][];
    try {
      ({ quads } = await this.send<{ quads: number[][] }>('DOM.getContentQuads', {
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

  /** The script object of the element of `ref`. */
  async objectOf(ref: string): Promise<string> {
    const { backendNodeId } = await this.element(ref);
    const { object } = await this.send<{ object: { objectId: string } }>('DOM.resolveNode', {
      backendNodeId,
    });
    return object.objectId;
  }

  /**
   * Runs an action; should it open a dialog, stops waiting for it (the page is blocked until the
   * dialog is answered) and leaves the dialog in the modal state: undefined then.
   */
  async act<T>(run: () => Promise<T>): Promise<T | undefined> {
    const tab = this.record;
    const dialog = new AbortController();
    const onDialog = () => dialog.abort(DIALOG_OPENED);
    tab.onDialog.add(onDialog);
    try {
      return await abortable(run(), dialog.signal);
    } catch (err) {
      if (err === DIALOG_OPENED) return undefined;
      throw err;
    } finally {
      tab.onDialog.delete(onDialog);
    }
  }
}

/** A script's value, or the tool failure naming what it threw. */
function valueOf<T>(r: { result: { value?: T }; exceptionDetails?: ExceptionDetails }): T {
  if (r.exceptionDetails) {
    throw fail(
      `JavaScript error: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text ?? 'unknown'}`,
      'javascript_error',
    );
  }
  return r.result.value as T;
}
