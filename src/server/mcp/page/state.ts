/**
 * What the agent reads of the current tab: its state after an action (URL, title, the
 * accessibility snapshot whose refs the tools take, the dialogs waiting), screenshots of the
 * viewport, the whole page or one element, and the viewport's size.
 */
import type { CdpParams } from '../../chromium/cdp.js';
import { renderSnapshot, type AXNode } from '../snapshot.js';
import type { PageConnection } from './connection.js';
import { describeModal } from './records.js';
import type { TargetInfo } from './tabs.js';

export interface PageState {
  url: string;
  title: string;
  /** Empty while a dialog is open (the page runs no script until it is answered). */
  snapshot: string;
  /** Dialogs and file choosers waiting for an answer, as lines for the agent. */
  modal: string[];
}

/** The current tab's state; a snapshot replaces the refs of the last one. */
export async function state(c: PageConnection): Promise<PageState> {
  const modal = c.modal.map(describeModal);
  if (c.modal.some((m) => m.kind === 'dialog')) {
    // the page runs no script while a dialog is open: what the browser knows of the tab
    const { targetInfo } = await c.cdp.send<{ targetInfo: TargetInfo }>('Target.getTargetInfo', {
      targetId: c.targetId,
    });
    return { url: targetInfo.url, title: targetInfo.title, snapshot: '', modal };
  }
  const { nodes } = await c.send<{ nodes: AXNode[] }>('Accessibility.getFullAXTree', {}, 30_000);
  const snap = renderSnapshot(nodes);
  c.refs = snap.refs;
  const info = await c.eval<{ url: string; title: string }>(
    '({ url: location.href, title: document.title })',
  );
  return { ...info, snapshot: snap.text, modal };
}

export async function screenshot(
  c: PageConnection,
  opts: { type?: 'png' | 'jpeg'; ref?: string | undefined; fullPage?: boolean | undefined },
): Promise<{ data: string; mimeType: string }> {
  const format = opts.type ?? 'png';
  const params: CdpParams = { format };
  if (opts.ref !== undefined) {
    const { backendNodeId } = await c.element(opts.ref);
    const { model } = await c.send<{ model: { border: number[] } }>('DOM.getBoxModel', {
      backendNodeId,
    });
    const xs = model.border.filter((_, i) => i % 2 === 0);
    const ys = model.border.filter((_, i) => i % 2 === 1);
    const x = Math.min(...xs);
    const y = Math.min(...ys);
    params.clip = { x, y, width: Math.max(...xs) - x, height: Math.max(...ys) - y, scale: 1 };
  } else if (opts.fullPage) {
    const { cssContentSize } = await c.send<{
      cssContentSize: { width: number; height: number };
    }>('Page.getLayoutMetrics');
    params.captureBeyondViewport = true;
    params.clip = { x: 0, y: 0, ...cssContentSize, scale: 1 };
  }
  const { data } = await c.send<{ data: string }>('Page.captureScreenshot', params, 30_000);
  return { data, mimeType: `image/${format}` };
}

/** The viewport of the current tab, as Playwright's `setViewportSize` sets it. */
export async function resize(c: PageConnection, width: number, height: number): Promise<void> {
  await c.send('Emulation.setDeviceMetricsOverride', {
    width,
    height,
    deviceScaleFactor: 0,
    mobile: false,
  });
}
