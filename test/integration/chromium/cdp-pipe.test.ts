/**
 * DevTools on a pipe, shared through the relay (src/server/chromium/{pipe,mux,relay}.ts):
 * no process of a browser instance's Chromium listens on any TCP port, and several clients use
 * one `cdp_url` at once, each as if it had its own DevTools connection: their ids may collide,
 * replies and events reach only their own client, and one cannot use another's sessions.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { descendants } from '../../../src/internal/process.js';
import { eventually, instancePids, startBrowser as startBrowserOn } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';
import { startSite, type TestSite } from '../../helpers/site.js';

let site: TestSite;
beforeAll(async () => {
  site = await startSite();
});
afterAll(async () => {
  await site?.close();
});
// the test site is on the host's loopback, which instances reach only when allowed
const server = useServer({ isolation: { allowHostLoopback: true } });

const startBrowser = () => startBrowserOn(server);
const stop = (id: string) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' });

/**
 * Chromium processes started by this test file's server (one browser instance at a time), with
 * their command lines (helpers rewrite theirs into one space-separated string).
 */
function chromiumProcesses(): { pid: number; cmdline: string }[] {
  return descendants(process.pid).flatMap((pid) => {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return /^[^\0 ]*\/chromium[\0 ]/.test(cmdline) ? [{ pid, cmdline }] : [];
    } catch {
      return []; // exited meanwhile
    }
  });
}

/** Inodes of the TCP sockets (v4 and v6) in LISTEN state in the network namespace of `pid`. */
function listeningInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const file of ['tcp', 'tcp6']) {
    const lines = readFileSync(`/proc/${pid}/net/${file}`, 'utf8').trim().split('\n').slice(1);
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A') inodes.add(f[9]!); // st 0A = TCP_LISTEN; field 9 is the inode
    }
  }
  return inodes;
}

/** Inodes of the sockets `pid` holds open. */
function socketInodes(pid: number): string[] {
  const out: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) out.push(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  return out;
}

/** The listening TCP sockets that any of `pids` holds. */
function listenersOf(pids: number[]): string[] {
  return pids.flatMap((pid) => {
    try {
      const listening = listeningInodes(pid);
      return socketInodes(pid).filter((inode) => listening.has(inode));
    } catch {
      return []; // exited meanwhile
    }
  });
}

interface Message {
  id?: number;
  method?: string;
  sessionId?: string;
  result?: Record<string, unknown>;
  error?: { message: string };
}

/** A raw DevTools client on `url` that records everything it receives. */
async function rawClient(url: string) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  const received: Message[] = [];
  const waiters: (() => void)[] = [];
  ws.on('message', (data) => {
    received.push(JSON.parse(data.toString()) as Message);
    for (const w of waiters.splice(0)) w();
  });
  /** The first message received that `match`es, waiting up to 10 s for it. */
  const next = async (match: (m: Message) => boolean): Promise<Message> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const found = received.find(match);
      if (found) return found;
      if (Date.now() > deadline) throw new Error('no such message within 10 s');
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 1000);
      });
    }
  };
  let lastId = 0;
  /** Send a command with the next id (ids count from 1 in each client) and wait for its reply. */
  const call = async (method: string, params: Record<string, unknown> = {}, sessionId?: string) => {
    const id = ++lastId;
    ws.send(JSON.stringify({ id, method, params, ...(sessionId && { sessionId }) }));
    return next((m) => m.id === id);
  };
  const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
  return { received, call, next, closed, close: () => ws.close() };
}

describe('DevTools on a pipe', () => {
  it('no Chromium process of a browser instance listens on a TCP port', async () => {
    // the check itself finds a listener this process holds
    const probe = createServer().listen(0, '127.0.0.1');
    await new Promise((r) => probe.once('listening', r));
    expect(listenersOf([process.pid]).length).toBeGreaterThan(0);
    probe.close();

    const { id, cdpUrl } = await startBrowser();
    const browser = await chromium.connectOverCDP(cdpUrl);
    const page = browser.contexts()[0]!.pages()[0]!;
    await page.goto(`${site.origin}/listening`); // renderer and network service up
    const processes = chromiumProcesses();
    expect(processes.length).toBeGreaterThan(2); // browser, zygotes, renderer, utilities
    // this instance's own (a warm pool, when one is on, runs others beside it)
    const main = processes.filter(
      (p) => !p.cmdline.includes('--type=') && instancePids(id).includes(p.pid),
    );
    expect(main).toHaveLength(1);
    const argv = main[0]!.cmdline.split('\0');
    expect(argv).toContain('--remote-debugging-pipe');
    expect(argv.filter((a) => a.startsWith('--remote-debugging-port'))).toEqual([]);
    expect(listenersOf(processes.map((p) => p.pid))).toEqual([]);
    await browser.close();
    await stop(id);
  });
});

describe('one cdp_url, several clients', () => {
  it('two Playwright clients work at once, and one leaving does not disturb the other', async () => {
    const { id, cdpUrl } = await startBrowser();
    const [a, b] = await Promise.all([
      chromium.connectOverCDP(cdpUrl),
      chromium.connectOverCDP(cdpUrl),
    ]);
    const work = async (browser: Browser, name: string) => {
      const context = await browser.newContext();
      const page = await context.newPage();
      for (let i = 0; i < 5; i++) {
        await page.goto(`${site.origin}/${name}/${i}`);
        expect(await page.evaluate(() => location.pathname)).toBe(`/${name}/${i}`);
        expect(await page.title()).toBe(`Page /${name}/${i}`);
      }
      expect((await page.screenshot()).subarray(1, 4).toString()).toBe('PNG');
      return context;
    };
    const [ca] = await Promise.all([work(a, 'a'), work(b, 'b')]);
    // each has its own context with its page; the default context and its tab are shared
    // (where Playwright also lists the other client's page, as with any two connections)
    const urls = (browser: Browser) => browser.contexts().map((c) => c.pages().map((p) => p.url()));
    expect(urls(a)[1]).toEqual([`${site.origin}/a/4`]);
    expect(urls(b)[1]).toEqual([`${site.origin}/b/4`]);
    expect(urls(a)[0]).toContain('about:blank');
    expect(urls(b)[0]).toContain('about:blank');

    await b.close(); // b's context goes, a's stays
    const again = await chromium.connectOverCDP(cdpUrl);
    await ca.pages()[0]!.goto(`${site.origin}/a/after`);
    expect(await ca.pages()[0]!.title()).toBe('Page /a/after');
    const tab = again.contexts()[0]!.pages()[0]!;
    await tab.goto(`${site.origin}/again`);
    expect(await tab.evaluate(() => document.title)).toBe('Page /again');
    await Promise.all([a.close(), again.close()]);
    await stop(id);
  });

  it('Puppeteer and Playwright at once, on the same tab', async () => {
    const { id, cdpUrl } = await startBrowser();
    const pw = await chromium.connectOverCDP(cdpUrl);
    const pp = await puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: null });
    const [pwPage] = pw.contexts()[0]!.pages();
    const [ppPage] = await pp.pages();
    await pwPage!.goto(`${site.origin}/shared`);
    // the navigation was another client's: Puppeteer learns of it by events, retry meanwhile
    const title = () => ppPage!.evaluate(() => document.title).catch(() => '');
    await eventually(async () => (await title()) === 'Page /shared', 'Puppeteer to see it');
    const [own, shared] = await Promise.all([
      pp.newPage().then(async (page) => {
        await page.goto(`${site.origin}/puppeteer`);
        return page.title();
      }),
      pwPage!.evaluate(() => document.title),
    ]);
    expect([own, shared]).toEqual(['Page /puppeteer', 'Page /shared']);
    await pp.disconnect();
    expect(await pwPage!.title()).toBe('Page /shared');
    await pw.close();
    await stop(id);
  });

  it('a page endpoint talks to that page alone and closes with it', async () => {
    const { id, cdpUrl } = await startBrowser();
    const browser = await rawClient(cdpUrl);
    const created = await browser.call('Target.createTarget', { url: `${site.origin}/endpoint` });
    const targetId = created.result?.targetId as string;
    const page = await rawClient(
      cdpUrl.replace(/devtools\/browser\/[^?]+/, `devtools/page/${targetId}`),
    );
    await eventually(async () => {
      const r = await page.call('Runtime.evaluate', {
        expression: 'document.title',
        returnByValue: true,
      });
      return (r.result as { result?: { value?: unknown } }).result?.value === 'Page /endpoint';
    }, 'the page to load');
    expect(page.received.every((m) => m.sessionId === undefined)).toBe(true);
    await browser.call('Target.closeTarget', { targetId });
    await page.closed;
    browser.close();
    await stop(id);
  });

  it('raw clients: equal ids, own replies and events, no use of foreign sessions', async () => {
    const { id, cdpUrl } = await startBrowser();
    const [one, two] = await Promise.all([rawClient(cdpUrl), rawClient(cdpUrl)]);
    // the same id (1) from both, at once: each gets its own context back
    const [r1, r2] = await Promise.all([
      one.call('Target.createBrowserContext'),
      two.call('Target.createBrowserContext'),
    ]);
    const ctx1 = r1.result?.browserContextId;
    const ctx2 = r2.result?.browserContextId;
    expect(ctx1).toEqual(expect.any(String));
    expect(ctx2).toEqual(expect.any(String));
    expect(ctx1).not.toBe(ctx2);

    // one attaches to a page of its own and watches it; two never sees that session
    const created = await one.call('Target.createTarget', {
      url: 'about:blank',
      browserContextId: ctx1,
    });
    const targetId = created.result?.targetId as string;
    const attach = await one.call('Target.attachToTarget', { targetId, flatten: true });
    const sessionId = attach.result?.sessionId as string;
    await one.call('Page.enable', {}, sessionId);
    await one.call('Page.navigate', { url: `${site.origin}/one` }, sessionId);
    await one.next((m) => m.method === 'Page.loadEventFired' && m.sessionId === sessionId);

    const foreign = await two.call('Runtime.evaluate', { expression: '1' }, sessionId);
    expect(foreign.error).toMatchObject({ message: 'Session with given id not found.' });
    const detach = await two.call('Target.detachFromTarget', { sessionId });
    expect(detach.error).toBeDefined(); // not its session to end
    const path = await one.call(
      'Runtime.evaluate',
      { expression: 'location.pathname', returnByValue: true },
      sessionId,
    );
    expect(path.result).toMatchObject({ result: { value: '/one' } });

    // nothing of one's reached two: only replies to its own ids, no session it does not own
    expect(two.received.map((m) => m.id)).toEqual([1, 2, 3]);
    expect(two.received.filter((m) => m.sessionId !== undefined)).toEqual([]);
    expect(one.received.filter((m) => m.id !== undefined).map((m) => m.id)).toEqual([
      1, 2, 3, 4, 5, 6,
    ]);

    // a client leaving takes its sessions with it (its contexts stay, as Chromium keeps them
    // for a DevTools connection that closes); the other one keeps working
    const attached = async () => {
      const { result } = await two.call('Target.getTargets');
      const infos = result?.targetInfos as { targetId: string; attached: boolean }[];
      return infos.find((t) => t.targetId === targetId)?.attached;
    };
    expect(await attached()).toBe(true);
    one.close();
    await eventually(
      async () => (await attached()) === false,
      "the page to lose the departed client's session",
    );
    const contexts = await two.call('Target.getBrowserContexts');
    expect(contexts.result?.browserContextIds).toEqual(expect.arrayContaining([ctx1, ctx2]));
    two.close();
    await stop(id);
  });
});
