/**
 * The Playwright MCP tools burrow added (issue 20), driven by the SDK's own `Client` as agents
 * use it, over Streamable HTTP at `/mcp` and over stdio from `burrow mcp`, against a page served
 * on 127.0.0.1. Each tool is checked by what it did to the page: a key press edits an input, a
 * form is filled, a prompt dialog is answered with a text the page reads back, a file reaches
 * the page, a drag moves an element, resize changes innerWidth, console messages and requests
 * are listed, close stops the instance. A `browser_*` call with no instance starts one (with
 * `burrow mcp`'s start options), and an HTTP client that only calls `close()` leaves nothing.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../src/client/index.js';
import { eventually, instancePids, testServer, type TestServer } from '../helpers/server.js';
import { root } from './run.js';

let server: TestServer;
let site: Server;
let origin = '';

const PAGE = `<!doctype html><html><head><title>Tools page</title></head><body style="margin:0">
<input id="keys" aria-label="Keys" value="ab">
<input id="first" aria-label="First name">
<input id="agree" type="checkbox" aria-label="Agree">
<select id="size" aria-label="Size"><option value="s">Small</option><option value="l">Large</option></select>
<input id="volume" type="range" min="0" max="10" value="1" aria-label="Volume">
<button id="ask" onclick="document.getElementById('answer').textContent = 'Answer: ' + prompt('Your name?', 'nobody')">Ask</button>
<p id="answer">No answer</p>
<input id="file" type="file" aria-label="Attachment" onchange="this.files[0].text().then((t) => { document.getElementById('got').textContent = 'Got ' + this.files[0].name + ': ' + t; })">
<p id="got">No file</p>
<div id="box" role="button" aria-label="Box" style="position:absolute;left:20px;top:300px;width:60px;height:60px;background:#c33"></div>
<div id="target" role="region" aria-label="Target" style="position:absolute;left:400px;top:300px;width:100px;height:100px;border:2px solid #333"></div>
<div id="card" draggable="true" aria-label="Card" style="position:absolute;left:20px;top:450px;width:80px;height:30px;background:#39c">Card</div>
<div id="lane" role="list" aria-label="Lane" style="position:absolute;left:400px;top:450px;width:120px;height:60px;border:2px dashed #333"></div>
<script>
card.addEventListener('dragstart', (e) => e.dataTransfer.setData('text/plain', 'card-1'));
lane.addEventListener('dragover', (e) => e.preventDefault());
lane.addEventListener('drop', (e) => { e.preventDefault(); lane.textContent = 'Dropped ' + e.dataTransfer.getData('text/plain'); });
console.log('hello from the page', 42);
console.error('something broke');
fetch('/api/data?x=1').then((r) => r.text());
let held = null;
box.addEventListener('mousedown', (e) => { held = [e.clientX - box.offsetLeft, e.clientY - box.offsetTop]; });
addEventListener('mousemove', (e) => { if (held) { box.style.left = (e.clientX - held[0]) + 'px'; box.style.top = (e.clientY - held[1]) + 'px'; } });
addEventListener('mouseup', () => { held = null; });
</script></body></html>`;

const DIALOGS = `<!doctype html><html><head><title>Dialogs</title></head><body>
<button id="ask" onclick="result.textContent = 'confirm: ' + confirm('Sure?')">Confirm</button>
<p id="result">nothing yet</p>
<input id="file" type="file" aria-label="Attachment">
<script>addEventListener('beforeunload', (e) => { e.preventDefault(); e.returnValue = ''; });</script>
</body></html>`;

beforeAll(async () => {
  server = await testServer();
  site = createServer((req, res) => {
    if (req.url === '/dialogs') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(DIALOGS);
      return;
    }
    if (req.url === '/plain') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>Plain</title><p>nothing logged here</p>');
      return;
    }
    if (req.url?.startsWith('/api/')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(PAGE);
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await server?.close();
  await new Promise((r) => site?.close(r));
});

const texts = (r: CallToolResult) =>
  r.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join('\n');

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (r.isError) throw new Error(`${name} failed: ${texts(r)}`);
  return texts(r);
}

/** `[ref=eN]` of the first snapshot line matching `line`. */
function refOf(snapshot: string, line: RegExp): string {
  const hit = snapshot.split('\n').find((l) => line.test(l));
  const ref = hit && /\[ref=(e\d+)\]/.exec(hit)?.[1];
  if (!ref) throw new Error(`no ${line} in snapshot:\n${snapshot}`);
  return ref;
}

const evaluate = async (client: Client, fn: string) =>
  JSON.parse((await call(client, 'browser_evaluate', { function: fn })).split('\nLive view')[0]!);

interface Listed {
  id: string;
  status: string;
  instance_type: string;
  resolution?: number[];
}
const instances = async () => (await (await server.api('/v1/instances')).json()) as Listed[];
const running = async () => (await instances()).filter((i) => i.status !== 'terminated');

const httpClient = async () => {
  const client = new Client({ name: 'playwright-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
    requestInit: { headers: { 'x-api-key': server.apiKey } },
  });
  await client.connect(transport);
  return client;
};

async function gone(id: string): Promise<void> {
  await eventually(
    async () => (await instances()).find((i) => i.id === id)?.status === 'terminated',
    `instance ${id} to stop`,
    30_000,
  );
  await eventually(() => instancePids(id).length === 0, `no processes of ${id}`, 15_000);
}

describe('Playwright MCP tools over Streamable HTTP', () => {
  it('starts a browser on first use; each tool does the real thing; close stops it', async () => {
    const client = await httpClient();
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      for (const n of [
        'browser_press_key',
        'browser_fill_form',
        'browser_file_upload',
        'browser_handle_dialog',
        'browser_drag',
        'browser_resize',
        'browser_close',
        'browser_console_messages',
        'browser_network_requests',
      ]) {
        expect(names).toContain(n);
      }
      expect(await running()).toEqual([]);

      // no instance_start: the first browser_* call starts a browser instance
      let snap = await call(client, 'browser_navigate', { url: origin });
      expect(snap).toContain('Page Title: Tools page');
      const [inst] = await running();
      expect(inst).toMatchObject({ instance_type: 'browser' });
      const id = inst!.id;

      // press_key: End, Backspace, then a character, in the focused input
      await call(client, 'browser_click', {
        element: 'Keys',
        ref: refOf(snap, /textbox "Keys"/),
      });
      await call(client, 'browser_press_key', { key: 'End' });
      await call(client, 'browser_press_key', { key: 'Backspace' });
      await call(client, 'browser_press_key', { key: 'z' });
      expect(await evaluate(client, '() => document.getElementById("keys").value')).toBe('az');
      const badKey = (await client.callTool({
        name: 'browser_press_key',
        arguments: { key: 'NoSuchKey' },
      })) as CallToolResult;
      expect(badKey.isError).toBe(true);

      // fill_form: a textbox, a checkbox, a combobox and a slider at once
      snap = await call(client, 'browser_snapshot');
      await call(client, 'browser_fill_form', {
        fields: [
          {
            name: 'First name',
            type: 'textbox',
            ref: refOf(snap, /textbox "First name"/),
            value: 'Ada',
          },
          { name: 'Agree', type: 'checkbox', ref: refOf(snap, /checkbox "Agree"/), value: 'true' },
          { name: 'Size', type: 'combobox', ref: refOf(snap, /combobox "Size"/), value: 'Large' },
          { name: 'Volume', type: 'slider', ref: refOf(snap, /slider "Volume"/), value: '7' },
        ],
      });
      expect(
        await evaluate(client, '() => [first.value, agree.checked, size.value, volume.value]'),
      ).toEqual(['Ada', true, 'l', '7']);

      // a prompt dialog: recorded, reported, blocks other actions, answered with a text
      snap = await call(client, 'browser_snapshot');
      const asked = await call(client, 'browser_click', {
        element: 'Ask',
        ref: refOf(snap, /button "Ask"/),
      });
      expect(asked).toContain('### Modal state');
      expect(asked).toContain('prompt dialog with message "Your name?"');
      expect(await call(client, 'browser_snapshot')).toContain('prompt dialog');
      const blocked = (await client.callTool({
        name: 'browser_press_key',
        arguments: { key: 'a' },
      })) as CallToolResult;
      expect(blocked.isError).toBe(true);
      expect(texts(blocked)).toContain('modal_state');
      const answered = await call(client, 'browser_handle_dialog', {
        accept: true,
        promptText: 'Grace',
      });
      expect(answered).not.toContain('### Modal state');
      expect(answered).toContain('Answer: Grace');
      const none = (await client.callTool({
        name: 'browser_handle_dialog',
        arguments: { accept: true },
      })) as CallToolResult;
      expect(none.isError).toBe(true);

      // a file chooser, answered with a file uploaded to the instance
      const api = new Burrow({ baseUrl: server.url, apiKey: server.apiKey });
      const up = await api.instance.upload(id, {
        file: Buffer.from('hello file'),
        filename: 'notes.txt',
        path: 'notes.txt',
      });
      await api.close();
      snap = await call(client, 'browser_snapshot');
      const chose = await call(client, 'browser_click', {
        element: 'Attachment',
        ref: refOf(snap, /button "Attachment"|"Attachment"/),
      });
      expect(chose).toContain('File chooser');
      await call(client, 'browser_file_upload', { paths: [up.path] });
      const got = await call(client, 'browser_wait_for', { text: 'Got notes.txt: hello file' });
      expect(got).toContain('Got notes.txt: hello file');

      // drag the box onto the target
      snap = await call(client, 'browser_snapshot');
      await call(client, 'browser_drag', {
        startElement: 'Box',
        startRef: refOf(snap, /button "Box"/),
        endElement: 'Target',
        endRef: refOf(snap, /region "Target"/),
      });
      const [bx, by] = (await evaluate(
        client,
        '() => { const r = box.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }',
      )) as number[];
      expect(bx).toBeGreaterThan(400);
      expect(bx).toBeLessThan(504);
      expect(by).toBeGreaterThan(300);
      expect(by).toBeLessThan(404);
      // an HTML5 drag and drop (draggable, dataTransfer) between two elements
      snap = await call(client, 'browser_snapshot');
      await call(client, 'browser_drag', {
        startElement: 'Card',
        startRef: refOf(snap, /"Card"/),
        endElement: 'Lane',
        endRef: refOf(snap, /list "Lane"/),
      });
      expect(await evaluate(client, '() => lane.textContent')).toBe('Dropped card-1');

      // resize the viewport
      await call(client, 'browser_resize', { width: 640, height: 480 });
      expect(await evaluate(client, '() => [innerWidth, innerHeight]')).toEqual([640, 480]);

      // console messages and network requests of the page
      const logs = await call(client, 'browser_console_messages');
      expect(logs).toContain('[LOG] hello from the page 42');
      expect(logs).toContain('[ERROR] something broke');
      const errors = await call(client, 'browser_console_messages', { onlyErrors: true });
      expect(errors).not.toContain('hello from the page');
      const requests = await call(client, 'browser_network_requests');
      expect(requests).toContain(`[GET] ${origin}/ => [200] OK`);
      expect(requests).toContain(`[GET] ${origin}/api/data?x=1 => [200] OK`);

      // a navigation starts both lists afresh, as in Playwright MCP: the new page's document
      // request is listed, nothing of the page before
      await call(client, 'browser_navigate', { url: `${origin}/plain` });
      expect(await call(client, 'browser_console_messages')).not.toContain('hello from the page');
      const after = await call(client, 'browser_network_requests');
      expect(after).toContain(`[GET] ${origin}/plain => [200] OK`);
      expect(after).not.toContain('/api/data');

      // close stops the instance; the next browser_* call starts another
      expect(await call(client, 'browser_close')).toContain(`stopped instance ${id}`);
      await gone(id);
      await call(client, 'browser_navigate', { url: `${origin}/again` });
      const next = await running();
      expect(next).toHaveLength(1);
      expect(next[0]!.id).not.toBe(id);
    } finally {
      await client.close(); // no DELETE: the session must still end and stop what it started
    }
    await eventually(async () => (await running()).length === 0, 'no instance left', 40_000);
  }, 240_000);

  it('a dismissed confirm, a cancelled file chooser and a beforeunload dialog', async () => {
    const client = await httpClient();
    try {
      let snap = await call(client, 'browser_navigate', { url: `${origin}/dialogs` });
      expect(snap).toContain('Page Title: Dialogs');

      // confirm, dismissed: the page reads false
      const asked = await call(client, 'browser_click', {
        element: 'Confirm',
        ref: refOf(snap, /button "Confirm"/),
      });
      expect(asked).toContain('confirm dialog with message "Sure?"');
      const dismissed = await call(client, 'browser_handle_dialog', { accept: false });
      expect(dismissed).toContain('Dismissed the dialog');
      expect(dismissed).not.toContain('### Modal state');
      expect(await evaluate(client, '() => result.textContent')).toBe('confirm: false');

      // a file chooser cancelled (no paths): the modal state ends, the input has no file
      snap = await call(client, 'browser_snapshot');
      const chose = await call(client, 'browser_click', {
        element: 'Attachment',
        ref: refOf(snap, /"Attachment"/),
      });
      expect(chose).toContain('File chooser');
      const cancelled = await call(client, 'browser_file_upload', {});
      expect(cancelled).toContain('Cancelled the file chooser');
      expect(cancelled).not.toContain('### Modal state');
      expect(await evaluate(client, '() => file.files.length')).toBe(0);

      // leaving a page that asks before unload (it has had a click): the dialog is the modal
      // state; accepting it lets the navigation go on
      const leaving = await call(client, 'browser_navigate', { url: `${origin}/plain` });
      expect(leaving).toContain('beforeunload dialog');
      const left = await call(client, 'browser_handle_dialog', { accept: true });
      expect(left).not.toContain('### Modal state');
      await call(client, 'browser_wait_for', { text: 'nothing logged here' });
      expect(await evaluate(client, '() => document.title')).toBe('Plain');
    } finally {
      await client.close();
    }
    await eventually(async () => (await running()).length === 0, 'no instance left', 40_000);
  }, 240_000);

  it('a client that only calls close() leaves no instance and no process', async () => {
    const client = await httpClient();
    await call(client, 'browser_navigate', { url: origin });
    const [inst] = await running();
    expect(inst).toBeDefined();
    const t = Date.now();
    await client.close();
    await gone(inst!.id);
    // well before the 30-minute idle timeout: the closed event stream ended the session
    expect(Date.now() - t).toBeLessThan(40_000);
  }, 120_000);
});

describe('Playwright MCP tools over stdio: burrow mcp', () => {
  it('the first browser_* call starts a browser with the options given to burrow mcp', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        '--import',
        'tsx',
        'src/cli/main.ts',
        'mcp',
        '--base-url',
        server.url,
        '--api-key',
        server.apiKey,
        '--resolution',
        '900x700',
        '--blocked-domain',
        'localhost',
      ],
      cwd: root,
      env: { ...(process.env as Record<string, string>) },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'playwright-agent', version: '1.0.0' });
    await client.connect(transport);
    let id = '';
    try {
      const snap = await call(client, 'browser_navigate', { url: origin });
      expect(snap).toContain('Page Title: Tools page');
      const [inst] = await running();
      expect(inst).toMatchObject({ instance_type: 'browser', resolution: [900, 700] });
      id = inst!.id;
      expect(await evaluate(client, '() => [innerWidth, innerHeight]')).toEqual([900, 700]);
      // the same site by a blocked name: refused by the instance (the name is not blocked
      // elsewhere, so only --blocked-domain can have refused it)
      const blocked = (await client.callTool({
        name: 'browser_navigate',
        arguments: { url: origin.replace('127.0.0.1', 'localhost') },
      })) as CallToolResult;
      expect(texts(blocked)).not.toContain('Page Title: Tools page');
      await call(client, 'browser_navigate', { url: origin });
      await call(client, 'browser_press_key', { key: 'Tab' });
      const focused = await evaluate(client, '() => document.activeElement.id');
      expect(focused).toBe('keys');
    } finally {
      await client.close();
    }
    await gone(id);
  }, 180_000);
});
