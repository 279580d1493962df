/**
 * The browser tools of one instance (`browser_*` in tools/): one DevTools connection to the
 * instance's browser, through the token-checked relay, and the tab the agent works in. This class
 * is their face, one method per thing a tool does; the work is done in page/, one concern a file
 * (the connection and the current tab, what tabs have seen, tabs, waiting for navigations, mouse
 * and keyboard through the server's one CDP input layer, elements, dialogs, what the agent reads),
 * as Playwright's `Page` delegates to its `PageDelegate`.
 */
import { CdpConnection } from '../chromium/cdp.js';
import * as elements from './page/elements.js';
import { PageConnection } from './page/connection.js';
import * as input from './page/input.js';
import * as modals from './page/modals.js';
import * as navigation from './page/navigation.js';
import type { ConsoleMessage, ModalState, NetworkRequest } from './page/records.js';
import * as view from './page/state.js';
import * as tabs from './page/tabs.js';

export type { ConsoleMessage, ModalState, NetworkRequest } from './page/records.js';
export type { PageState } from './page/state.js';

export class PageTools {
  readonly #c: PageConnection;

  private constructor(cdp: CdpConnection) {
    this.#c = new PageConnection(cdp);
  }

  /** Connects to a DevTools endpoint and attaches to its first tab (opening one if none). */
  static async open(cdpUrl: string): Promise<PageTools> {
    const cdp = await CdpConnection.connect(cdpUrl);
    const tools = new PageTools(cdp);
    const c = tools.#c;
    try {
      const pages = await tabs.pages(c);
      await tabs.select(c, pages[0]?.targetId ?? (await tabs.newTarget(c)));
      return tools;
    } catch (err) {
      cdp.close();
      throw err;
    }
  }

  get isOpen(): boolean {
    return this.#c.cdp.isOpen;
  }

  close(): void {
    this.#c.cdp.close('the MCP session ended');
  }

  /** Dialogs and file choosers of the current tab waiting for an answer. */
  get modal(): readonly ModalState[] {
    return this.#c.modal;
  }

  /** Refuses to act on a tab whose dialog waits for an answer (it runs nothing until then). */
  assertNoDialog(): void {
    modals.assertNoDialog(this.#c);
  }

  /** Navigates the tab; a dialog the old page opens (`beforeunload`) ends the wait. */
  navigate(url: string): Promise<void> {
    return navigation.navigate(this.#c, url);
  }

  back(): Promise<void> {
    return navigation.back(this.#c);
  }

  waitFor(opts: { text?: string; textGone?: string; time?: number }): Promise<void> {
    return navigation.waitFor(this.#c, opts);
  }

  state(): Promise<view.PageState> {
    return view.state(this.#c);
  }

  screenshot(opts: {
    type?: 'png' | 'jpeg';
    ref?: string | undefined;
    fullPage?: boolean | undefined;
  }): Promise<{ data: string; mimeType: string }> {
    return view.screenshot(this.#c, opts);
  }

  /** The viewport of the current tab, as Playwright's `setViewportSize` sets it. */
  resize(width: number, height: number): Promise<void> {
    return view.resize(this.#c, width, height);
  }

  click(
    ref: string,
    opts: { button?: 'left' | 'right' | 'middle'; doubleClick?: boolean; modifiers?: string[] },
  ): Promise<void> {
    return input.click(this.#c, ref, opts);
  }

  hover(ref: string): Promise<void> {
    return input.hover(this.#c, ref);
  }

  /** Replaces the element's text with `text` (as typing would), then Enter if `submit`. */
  type(ref: string, text: string, submit: boolean): Promise<void> {
    return input.type(this.#c, ref, text, submit);
  }

  /** A Playwright key name or character, modifiers joined by `+`, on the focused element. */
  pressKey(key: string): Promise<void> {
    return input.pressKey(this.#c, key);
  }

  drag(from: string, to: string): Promise<void> {
    return input.drag(this.#c, from, to);
  }

  fill(field: { type: string; ref: string; value: string }): Promise<void> {
    return elements.fill(this.#c, field);
  }

  selectOption(ref: string, values: string[]): Promise<string[]> {
    return elements.selectOption(this.#c, ref, values);
  }

  /** Runs `fn` (a function's source, or an expression) in the page, on the element if given. */
  evaluate(fn: string, ref: string | undefined): Promise<unknown> {
    return elements.evaluate(this.#c, fn, ref);
  }

  /** Answers the open dialog of the current tab. */
  handleDialog(accept: boolean, promptText: string | undefined): Promise<void> {
    return modals.handleDialog(this.#c, accept, promptText);
  }

  /** Answers the open file chooser with files on the instance; no paths cancels it. */
  uploadFiles(paths: readonly string[] | undefined): Promise<void> {
    return modals.uploadFiles(this.#c, paths);
  }

  /** Console messages of the current tab since burrow attached to it, oldest first. */
  consoleMessages(): readonly ConsoleMessage[] {
    return this.#c.record.console;
  }

  /** Requests of the page the current tab shows (its document's included), oldest first. */
  networkRequests(): NetworkRequest[] {
    return [...this.#c.record.requests.values()];
  }

  tabs(): Promise<{ index: number; url: string; title: string; current: boolean }[]> {
    return tabs.listTabs(this.#c);
  }

  async newTab(url?: string): Promise<void> {
    await tabs.select(this.#c, await tabs.newTarget(this.#c));
    if (url) await this.navigate(url);
  }

  selectTab(index: number): Promise<void> {
    return tabs.selectTab(this.#c, index);
  }

  closeTab(index: number | undefined): Promise<void> {
    return tabs.closeTab(this.#c, index);
  }
}
