/**
 * The tabs of the browser the MCP tools work in: listed in the order they were first seen (CDP
 * lists targets in no stable order, and `browser_tabs` names them by index), opened, selected
 * (attached once, with the domains the tools read enabled) and closed.
 */
import { newRecord } from './records.js';
import { fail, type PageConnection } from './connection.js';

export interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
  title: string;
}

/** The tabs in the order they were first seen. */
export async function pages(c: PageConnection): Promise<TargetInfo[]> {
  const { targetInfos } = await c.cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
  const found = targetInfos.filter((t) => t.type === 'page');
  const live = new Set(found.map((p) => p.targetId));
  c.order = c.order.filter((id) => live.has(id));
  for (const p of found) if (!c.order.includes(p.targetId)) c.order.push(p.targetId);
  return found.sort((a, b) => c.order.indexOf(a.targetId) - c.order.indexOf(b.targetId));
}

/** Opens a tab (not selected); its target id. */
export async function newTarget(c: PageConnection, url = 'about:blank'): Promise<string> {
  const { targetId } = await c.cdp.send<{ targetId: string }>('Target.createTarget', { url });
  if (!c.order.includes(targetId)) c.order.push(targetId);
  return targetId;
}

/** Makes `targetId` the current tab (attaching to it the first time) and brings it to front. */
export async function select(c: PageConnection, targetId: string): Promise<void> {
  const known = c.tabs.get(targetId);
  c.refs = new Map();
  if (known) {
    c.targetId = targetId;
    c.sessionId = known.sessionId;
  } else {
    const { sessionId } = await c.cdp.send<{ sessionId: string }>('Target.attachToTarget', {
      targetId,
      flatten: true,
    });
    c.tabs.set(targetId, newRecord(targetId, sessionId));
    c.targetId = targetId;
    c.sessionId = sessionId;
    await c.send('Page.enable');
    await c.send('DOM.enable');
    await c.send('Runtime.enable');
    await c.send('Network.enable');
    await c.send('Page.setInterceptFileChooserDialog', { enabled: true });
  }
  await c.cdp.send('Target.activateTarget', { targetId }).catch(() => undefined);
}

/** The tab at `index` of `pages`, or the current one. */
async function tabAt(c: PageConnection, index: number | undefined): Promise<TargetInfo> {
  const all = await pages(c);
  const tab = index === undefined ? all.find((p) => p.targetId === c.targetId) : all[index];
  if (!tab) throw fail(`No tab at index ${index} (there are ${all.length})`, 'tab_not_found');
  return tab;
}

export async function listTabs(
  c: PageConnection,
): Promise<{ index: number; url: string; title: string; current: boolean }[]> {
  return (await pages(c)).map((p, index) => ({
    index,
    url: p.url,
    title: p.title,
    current: p.targetId === c.targetId,
  }));
}

export async function selectTab(c: PageConnection, index: number): Promise<void> {
  await select(c, (await tabAt(c, index)).targetId);
}

/** Closes the tab at `index` (default the current one); closing the current one selects another. */
export async function closeTab(c: PageConnection, index: number | undefined): Promise<void> {
  const tab = await tabAt(c, index);
  await c.cdp.send('Target.closeTarget', { targetId: tab.targetId });
  if (tab.targetId !== c.targetId) return;
  // the current tab closed: continue in the first remaining one (or a new blank tab)
  const rest = (await pages(c)).filter((p) => p.targetId !== tab.targetId);
  await select(c, rest[0]?.targetId ?? (await newTarget(c)));
}
