/**
 * What a tab has seen since the MCP tools attached to it: its console messages and requests (as
 * Playwright's MCP server keeps them, those of the page it shows now), and the dialogs and file
 * choosers waiting for an answer. One listener per event for the whole connection sorts events
 * to their tab by session.
 */
import type { CdpConnection } from '../../chromium/cdp.js';

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
export interface TabRecord {
  /** The tab's target id, which is also the id of its main frame. */
  targetId: string;
  sessionId: string;
  console: ConsoleMessage[];
  requests: Map<string, NetworkRequest>;
  modal: ModalState[];
  /** Called when a dialog opens, so an action that opened it stops waiting for itself. */
  onDialog: Set<() => void>;
}

/** A fresh record of the tab `targetId`, attached as `sessionId`. */
export function newRecord(targetId: string, sessionId: string): TabRecord {
  return { targetId, sessionId, console: [], requests: new Map(), modal: [], onDialog: new Set() };
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

/** Keep `tabs` (by target id) up to date from the events of `cdp`. */
export function recordTabs(cdp: CdpConnection, tabs: Map<string, TabRecord>): void {
  const tabOf = (sid: string | undefined) => [...tabs.values()].find((t) => t.sessionId === sid);
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
    for (const [id, t] of tabs) if (t.sessionId === sid) tabs.delete(id);
  });
}

/** A modal state as the line the agent reads, naming the tool that answers it. */
export function describeModal(m: ModalState): string {
  return m.kind === 'dialog'
    ? `- [${m.type} dialog with message ${JSON.stringify(m.message)}${m.type === 'prompt' ? ` and default ${JSON.stringify(m.defaultPrompt)}` : ''}]: answer it with browser_handle_dialog`
    : `- [File chooser${m.multiple ? ' (several files)' : ''}]: answer it with browser_file_upload`;
}
