/**
 * burrow's MCP server driven by the SDK's own `Client`: over Streamable HTTP at `/mcp` on a
 * running server, and over stdio from `burrow mcp` (against that server, and with its embedded
 * one). A browser instance navigates to a page served here, is read through an accessibility
 * snapshot, clicked by reference, checked and screenshotted; an ubuntu instance runs bash, the
 * edit tool and code. Ending the MCP session stops its instances and leaves no process.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  instancePids,
  instanceProcesses,
  pngSize,
  testServer,
  type TestServer,
} from '../helpers/server.js';
import { node, root } from './run.js';
import { reapOrphans } from '../../src/session/reaper.js';

const dir = mkdtempSync(join(tmpdir(), 'bmcp-'));
let server: TestServer;
let site: Server;
let origin = '';

const PAGE = `<!doctype html><html><head><title>MCP page</title></head><body>
<h1>Greeter</h1>
<label>Name <input id="name" value=""></label>
<select id="color" aria-label="Color"><option value="r">Red</option><option value="g">Green</option></select>
<button id="hello" onclick="document.getElementById('out').textContent = 'Hello, ' + (document.getElementById('name').value || 'nobody') + ' in ' + document.getElementById('color').value">Say hello</button>
<p id="out">Nothing yet</p>
<a href="/second">Second page</a>
</body></html>`;

beforeAll(async () => {
  server = await testServer({ dataDir: join(dir, 'srv') });
  site = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(
      req.url === '/second'
        ? '<!doctype html><title>Second</title><p>On the second page</p>'
        : PAGE,
    );
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await server?.close();
  await new Promise((r) => site?.close(r));
  rmSync(dir, { recursive: true, force: true });
});

const texts = (r: CallToolResult) =>
  r.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join('\n');

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (r.isError) throw new Error(`${name} failed: ${texts(r)}`);
  return r;
}

/** `[ref=eN]` of the first snapshot line matching `line`. */
function refOf(snapshot: string, line: RegExp): string {
  const hit = snapshot.split('\n').find((l) => line.test(l));
  const ref = hit && /\[ref=(e\d+)\]/.exec(hit)?.[1];
  if (!ref) throw new Error(`no ${line} in snapshot:\n${snapshot}`);
  return ref;
}

/** The browser scenario of the issue; returns the instance id it started. */
async function browserScenario(client: Client): Promise<string> {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const n of [
    'instance_start',
    'instance_list',
    'instance_stop',
    'browser_navigate',
    'browser_navigate_back',
    'browser_snapshot',
    'browser_click',
    'browser_type',
    'browser_hover',
    'browser_select_option',
    'browser_evaluate',
    'browser_tabs',
    'browser_wait_for',
    'browser_take_screenshot',
    'computer_click_mouse',
    'computer_take_screenshot',
    'ubuntu_bash',
    'ubuntu_edit',
    'ubuntu_file',
    'ubuntu_code_execute',
    'auth_save',
    'auth_apply',
    'auth_list',
  ]) {
    expect(names).toContain(n);
  }
  const click = tools.find((t) => t.name === 'browser_click')!;
  expect(click.inputSchema.required).toEqual(expect.arrayContaining(['element', 'ref']));

  const started = await call(client, 'instance_start', {
    instance_type: 'browser',
    resolution: [800, 600],
  });
  const id = /Started browser instance (\S+)/.exec(texts(started))?.[1];
  expect(id).toBeTruthy();
  expect(texts(started)).toMatch(new RegExp(`Live view: http://\\S+/stream/${id}/`));

  const nav = await call(client, 'browser_navigate', { url: `${origin}/` });
  expect(texts(nav)).toContain('- Page Title: MCP page');
  const snap = texts(await call(client, 'browser_snapshot'));
  expect(snap).toMatch(/- heading "Greeter" \[level=1\] \[ref=e\d+\]/);
  expect(snap).toContain('Nothing yet');

  await call(client, 'browser_type', {
    element: 'Name field',
    ref: refOf(snap, /textbox "Name"/),
    text: 'Ada',
  });
  await call(client, 'browser_select_option', {
    element: 'Color',
    ref: refOf(snap, /combobox "Color"/),
    values: ['Green'],
  });
  const clicked = await call(client, 'browser_click', {
    element: 'Say hello button',
    ref: refOf(snap, /button "Say hello"/),
  });
  expect(texts(clicked)).toContain('Hello, Ada in g');
  const value = await call(client, 'browser_evaluate', {
    function: "() => document.getElementById('out').textContent",
  });
  expect(texts(value)).toContain('"Hello, Ada in g"');
  expect(texts(await call(client, 'instance_current_url'))).toContain(`${origin}/`);

  const shot = await call(client, 'browser_take_screenshot');
  const image = shot.content.find((c) => c.type === 'image');
  expect(image).toMatchObject({ type: 'image', mimeType: 'image/png' });
  expect(pngSize(Buffer.from((image as { data: string }).data, 'base64'))).toEqual([800, 600]);

  // a link, back, tabs and waiting
  const snap2 = texts(await call(client, 'browser_snapshot'));
  const followed = await call(client, 'browser_click', {
    element: 'link',
    ref: refOf(snap2, /link "Second page"/),
  });
  expect(texts(followed)).toContain('On the second page'); // the navigation was waited for
  await call(client, 'browser_wait_for', { text: 'On the second page' });
  const back = await call(client, 'browser_navigate_back');
  expect(texts(back)).toContain('- Page Title: MCP page');
  const tabs = await call(client, 'browser_tabs', { action: 'new', url: `${origin}/second` });
  expect(texts(tabs)).toMatch(/- 1: \(current\) \[Second\]/);
  await call(client, 'browser_tabs', { action: 'close' });

  // burrow's computer actions on the same instance: pixels
  const pix = await call(client, 'computer_take_screenshot');
  expect(pix.content.some((c) => c.type === 'image')).toBe(true);

  // auth states: save this browser's storage by name, apply it to a fresh instance
  await call(client, 'browser_evaluate', {
    function:
      "() => { localStorage.setItem('mcp', 'remembered'); document.cookie = 'mcp=1; path=/'; }",
  });
  const name = `mcp-e2e-${Math.random().toString(36).slice(2)}`;
  const saved = await call(client, 'auth_save', { name });
  expect(texts(saved)).toContain(`(${name})`);
  expect(texts(await call(client, 'auth_list'))).toContain(`"${name}"`);
  const second = await call(client, 'instance_start', {
    instance_type: 'browser',
    auth_state: name,
  });
  const secondId = /Started browser instance (\S+)/.exec(texts(second))![1]!;
  await call(client, 'browser_navigate', { url: `${origin}/second` });
  const restored = await call(client, 'browser_evaluate', {
    function: "() => localStorage.getItem('mcp') + ' ' + document.cookie",
  });
  expect(texts(restored)).toContain('"remembered mcp=1"');
  await call(client, 'instance_stop', { instance_id: secondId });
  const js = (await client.callTool({
    name: 'browser_evaluate',
    arguments: { function: "() => { throw new Error('boom') }", instance_id: id },
  })) as CallToolResult;
  expect(js.isError).toBe(true);
  expect(texts(js)).toMatch(/boom.*\[javascript_error\]/s);

  // errors are tool errors with burrow's message and code; the session goes on
  const stale = (await client.callTool({
    name: 'browser_click',
    arguments: { element: 'nothing', ref: 'e9999' },
  })) as CallToolResult;
  expect(stale.isError).toBe(true);
  expect(texts(stale)).toMatch(/Ref e9999 not found.*\[ref_not_found\]/);
  const missing = (await client.callTool({
    name: 'instance_current_url',
    arguments: { instance_id: 'no-such-instance' },
  })) as CallToolResult;
  expect(missing.isError).toBe(true);
  expect(texts(missing)).toMatch(/not found \[instance_not_found, HTTP 404\]/);
  const invalid = (await client.callTool({
    name: 'computer_click_mouse',
    arguments: { button: 'sideways' },
  })) as CallToolResult;
  expect(invalid.isError).toBe(true);
  return id!;
}

/** The ubuntu scenario: bash, edit and code execution; returns the instance id. */
async function ubuntuScenario(client: Client): Promise<string> {
  const started = await call(client, 'instance_start', { instance_type: 'ubuntu' });
  const id = /Started ubuntu instance (\S+)/.exec(texts(started))?.[1];
  expect(id).toBeTruthy();
  const bash = await call(client, 'ubuntu_bash', {
    command: 'cd /tmp && echo "from bash" > a.txt && pwd',
  });
  expect(texts(bash)).toContain('/tmp');
  await call(client, 'ubuntu_edit', {
    command: 'create',
    path: '/home/user/notes.txt',
    file_text: 'first line\nsecond line\n',
  });
  await call(client, 'ubuntu_edit', {
    command: 'str_replace',
    path: '/home/user/notes.txt',
    old_str: 'second',
    new_str: 'edited',
  });
  const code = await call(client, 'ubuntu_code_execute', {
    code: "print(open('/home/user/notes.txt').read().split()[2], open('/tmp/a.txt').read().strip())",
  });
  expect(texts(code)).toContain('edited from bash');
  const file = await call(client, 'ubuntu_file', { command: 'exists', path: '/tmp/a.txt' });
  expect(texts(file)).toMatch(/true/i);
  // the browser tools on an ubuntu instance drive its desktop Chromium (started on demand)
  const nav = await call(client, 'browser_navigate', { url: `${origin}/` });
  expect(texts(nav)).toMatch(/- heading "Greeter" \[level=1\] \[ref=e\d+\]/);
  // Playwright MCP's tools work there too: resize the desktop browser's page, read it back
  await call(client, 'browser_resize', { width: 700, height: 500 });
  const size = await call(client, 'browser_evaluate', {
    function: '() => [innerWidth, innerHeight]',
  });
  expect(JSON.parse(texts(size).split('\nLive view')[0]!)).toEqual([700, 500]);
  const desktop = await call(client, 'computer_take_screenshot');
  expect(desktop.content.some((c) => c.type === 'image')).toBe(true);
  return id!;
}

async function stoppedOnServer(ids: string[]): Promise<void> {
  await eventually(
    async () => {
      const list = (await (await server.api('/v1/instances')).json()) as {
        id: string;
        status: string;
      }[];
      return ids.every((id) => list.find((i) => i.id === id)?.status === 'terminated');
    },
    'the session instances to stop',
    30_000,
  );
  await eventually(() => ids.every((id) => instancePids(id).length === 0), 'no processes', 15_000);
}

describe('MCP over Streamable HTTP at /mcp', () => {
  it('needs the API key', async () => {
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(401);
  });

  it('answers protocol mistakes with JSON-RPC errors, not a crash', async () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      server.api('/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body,
      });
    const notJson = await post('{"jsonrpc": ');
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ error: { code: -32700 } });
    const noSession = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    expect(noSession.status).toBe(400);
    expect(await noSession.json()).toMatchObject({ error: { code: -32000 } });
    const unknown = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), {
      'mcp-session-id': 'no-such-session',
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: -32001 } });
  });

  it('runs the browser and ubuntu scenarios and stops the instances when the session ends', async () => {
    const client = new Client({ name: 'burrow-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { 'x-api-key': server.apiKey } },
    });
    await client.connect(transport);
    const ids: string[] = [];
    try {
      ids.push(await browserScenario(client));
      ids.push(await ubuntuScenario(client));
    } finally {
      await transport.terminateSession(); // DELETE /mcp: the MCP session ends
      await client.close();
    }
    await stoppedOnServer(ids);
  }, 240_000);
});

describe('MCP over stdio: burrow mcp', () => {
  it('is listed by burrow --help and explains itself', async () => {
    const help = await node(['--import', 'tsx', 'src/cli/main.ts', '--help']);
    expect(help.stdout).toMatch(/^ {2}mcp\s+MCP server on stdio/m);
    const usage = await node(['--import', 'tsx', 'src/cli/main.ts', 'mcp', '--help']);
    expect(usage.code).toBe(0);
    expect(usage.stdout).toContain('burrow mcp [--base-url URL] [--api-key-file PATH]');
  });

  const stdio = (args: string[], env: Record<string, string> = {}) =>
    new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', 'src/cli/main.ts', 'mcp', ...args],
      cwd: root,
      env: { ...(process.env as Record<string, string>), ...env },
      stderr: 'pipe',
    });

  it('against a server (--base-url): both scenarios, instances stopped when the host disconnects', async () => {
    const env = { BURROW_DATA_DIR: join(dir, 'cli') };
    const transport = stdio(['--base-url', server.url, '--api-key', server.apiKey], env);
    const client = new Client({ name: 'burrow-test', version: '1.0.0' });
    await client.connect(transport);
    const ids: string[] = [];
    try {
      ids.push(await browserScenario(client));
      ids.push(await ubuntuScenario(client));
    } finally {
      await client.close(); // closes stdin: the process stops its instances and exits
    }
    await stoppedOnServer(ids);
    // stopped cleanly: nothing left in the ledger for a reaper
    await eventually(() => {
      try {
        return readdirSync(join(dir, 'cli', 'sessions')).length === 0;
      } catch {
        return true;
      }
    }, 'the ledger to be empty');
  }, 300_000);

  it('killed with SIGKILL, it leaves its instances in the ledger for burrow reap', async () => {
    const dataDir = join(dir, 'killed');
    const transport = stdio(['--base-url', server.url, '--api-key', server.apiKey], {
      BURROW_DATA_DIR: dataDir,
    });
    const client = new Client({ name: 'burrow-test', version: '1.0.0' });
    await client.connect(transport);
    const started = await call(client, 'instance_start', { instance_type: 'browser' });
    const id = /Started browser instance (\S+)/.exec(texts(started))![1]!;
    process.kill(transport.pid!, 'SIGKILL');
    await client.close().catch(() => undefined);
    await eventually(() => {
      try {
        process.kill(transport.pid!, 0);
        return false;
      } catch {
        return true;
      }
    }, 'the killed process to be gone');
    const report = await reapOrphans({
      baseUrl: server.url,
      apiKey: server.apiKey,
      ledgerDir: join(dataDir, 'sessions'),
    });
    expect(JSON.stringify(report)).toContain(id);
    await stoppedOnServer([id]);
  }, 120_000);

  it('with the embedded server: no process is left once the host disconnects', async () => {
    const dataDir = join(dir, 'embedded');
    const transport = stdio([], {
      BURROW_DATA_DIR: dataDir,
      BURROW_BASE_URL: '',
      BURROW_API_KEY: '',
    });
    const client = new Client({ name: 'burrow-test', version: '1.0.0' });
    await client.connect(transport);
    const pid = transport.pid!;
    const runs = readdirSync(join(dataDir, 'instances')).flatMap(
      (n) => /^run-(\d+)-/.exec(n)?.[1] ?? [],
    );
    expect(runs.map(Number)).toContain(pid);
    const started = await call(client, 'instance_start', { instance_type: 'browser' });
    expect(texts(started)).toContain('Live view: http://127.0.0.1:');
    const nav = await call(client, 'browser_navigate', { url: `${origin}/second` });
    expect(texts(nav)).toContain('On the second page');
    expect(instanceProcesses(undefined, pid).length).toBeGreaterThan(0);
    await client.close();
    await eventually(
      () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      'burrow mcp to exit',
      30_000,
    );
    expect(instanceProcesses(undefined, pid)).toEqual([]);
  }, 180_000);
});
