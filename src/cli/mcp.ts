/**
 * `burrow mcp`: burrow's MCP server on stdio, for desktop agent hosts. With `--base-url` or
 * `BURROW_BASE_URL` the tools talk to that server (key from `--api-key-file` / `BURROW_API_KEY`);
 * without, a server is started in this process on a random loopback port (the embedded
 * default) and stops when the host closes stdin. Either way every instance the session started
 * is stopped on the way out. stdout carries only MCP messages: logs go to stderr.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { proxyServerProblem } from '../api/index.js';
import { Burrow } from '../client/index.js';
import type { McpBackend } from '../server/mcp/backend.js';
import type { AutoStartOptions } from '../server/mcp/context.js';
import { createMcpSession } from '../server/mcp/tools.js';
import { Ledger } from '../session/ledger.js';
import { UsageError } from './common.js';
import { clientBackend } from './mcp-backend.js';
import { clientApiKey, hideSecretArgs } from './secrets.js';

export const usage = `burrow mcp [--base-url URL] [--api-key-file PATH] [--resolution WxH]
           [--blocked-domain DOMAIN]... [--auth-state ID_OR_NAME]
           [--proxy-server URL] [--proxy-bypass HOSTS]

Serves the Model Context Protocol on stdin/stdout for an agent host (Claude Desktop, Cursor,
VS Code…). With --base-url or BURROW_BASE_URL it uses that server (key from --api-key-file,
BURROW_API_KEY or BURROW_API_KEY_FILE; --api-key KEY works too, but puts the key where every
local user can read it); otherwise it runs an embedded server on a random loopback port. Instances the
session started are stopped when the host disconnects. Logs go to stderr.

A browser_* call made before any instance_start starts a browser instance, as Playwright's MCP
server launches its browser on first use, with --resolution (e.g. 1280x720), every
--blocked-domain, the saved auth state --auth-state applied, and the upstream proxy
--proxy-server (http://, https:// or socks5://host:port; --proxy-bypass: comma-separated hosts
reached directly). A proxy with credentials is given to instance_start as "proxy" instead.

Tools: instance_start/list/stop/current_url, browser_* (Playwright MCP names: navigate,
navigate_back, snapshot, click, type, hover, select_option, evaluate, tabs, wait_for,
take_screenshot, press_key, fill_form, drag, handle_dialog, file_upload, resize,
console_messages, network_requests, close), computer_* (every computer action), ubuntu_bash/edit/file/code_execute,
auth_save/apply/list.`;

const stderr = { write: (line: string) => void process.stderr.write(line) };

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      'base-url': { type: 'string' },
      'api-key': { type: 'string' },
      'api-key-file': { type: 'string' },
      resolution: { type: 'string' },
      'blocked-domain': { type: 'string', multiple: true },
      'auth-state': { type: 'string' },
      'proxy-server': { type: 'string' },
      'proxy-bypass': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  // an agent host keeps this process for its session: the key leaves its title (ps) at once
  hideSecretArgs(argv);
  const autoStart: AutoStartOptions = {};
  if (values.resolution !== undefined) {
    const m = /^(\d+)x(\d+)$/.exec(values.resolution);
    if (!m) throw new UsageError(`--resolution: expected WIDTHxHEIGHT, got "${values.resolution}"`);
    autoStart.resolution = [Number(m[1]), Number(m[2])];
  }
  if (values['blocked-domain']?.length) autoStart.blocked_domains = values['blocked-domain'];
  if (values['auth-state'] !== undefined) autoStart.auth_state = values['auth-state'];
  if (values['proxy-server'] !== undefined) {
    const problem = proxyServerProblem(values['proxy-server']);
    if (problem) throw new UsageError(`--proxy-server ${problem}`);
    autoStart.proxy = {
      server: values['proxy-server'],
      ...(values['proxy-bypass'] !== undefined && { bypass: values['proxy-bypass'] }),
    };
  } else if (values['proxy-bypass'] !== undefined) {
    throw new UsageError('--proxy-bypass needs --proxy-server');
  }

  // anything printed with console.log would corrupt the protocol
  console.log = console.error;
  console.info = console.error;

  const baseUrl = values['base-url'] ?? process.env.BURROW_BASE_URL;
  let embedded: { close(): Promise<void> } | undefined;
  let api: Burrow;
  if (baseUrl) {
    api = new Burrow({ baseUrl, apiKey: clientApiKey(values) });
  } else {
    const { startServer } = await import('../server/index.js');
    const server = await startServer({
      host: '127.0.0.1',
      port: 0,
      apiKey: `bk_${randomBytes(24).toString('base64url')}`,
      logDestination: stderr,
      // like a local browser, the embedded one may load pages served on this machine's loopback
      isolation: { allowHostLoopback: true },
    });
    embedded = server;
    api = new Burrow({ baseUrl: server.url, apiKey: server.apiKey });
  }

  // instances go into the bridge's ledger while they live, so that `burrow reap` (and any
  // openSession) stops them should this process be killed before it could
  const ledger = new Ledger();
  const base = clientBackend(api);
  const backend: McpBackend = {
    ...base,
    start: async (body) => {
      const inst = await base.start(body);
      await ledger.record(inst.id, api.baseUrl, embedded !== undefined).catch(() => undefined);
      return inst;
    },
    stop: async (id) => {
      await base.stop(id);
      await ledger.remove(id, api.baseUrl).catch(() => undefined);
    },
  };
  const session = createMcpSession({ backend, autoStart });
  const transport = new StdioServerTransport();

  let finishing: Promise<void> | undefined;
  const finish = () =>
    (finishing ??= (async () => {
      await session.close();
      await api.close();
      await embedded?.close();
    })());
  const done = new Promise<void>((resolve) => {
    transport.onclose = () => void finish().then(resolve);
    process.stdin.once('end', () => void transport.close());
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => void transport.close());
    }
  });
  await session.server.connect(transport);
  await done;
}
