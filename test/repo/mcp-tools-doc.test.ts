/**
 * src/server/mcp/TOOLS.md names every tool the MCP session registers and every error code the
 * tools raise of their own; the tools' JSON schemas come from the zod contract (required fields
 * included). The session runs over the SDK's in-memory transport, no sockets.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { describe, expect, it } from 'vitest';
import { McpToolFailure, type McpBackend } from '../../src/server/mcp/backend.js';
import { createMcpSession } from '../../src/server/mcp/tools.js';

const doc = readFileSync(new URL('../../src/server/mcp/TOOLS.md', import.meta.url), 'utf8');

async function tools() {
  const session = createMcpSession({ backend: {} as McpBackend, version: 'test' });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await session.server.connect(a);
  const client = new Client({ name: 'doc-test', version: '1' });
  await client.connect(b);
  return { client, list: (await client.listTools()).tools };
}

describe('MCP tools and TOOLS.md', () => {
  it('documents every tool, and the schemas carry the contract', async () => {
    const { client, list } = await tools();
    try {
      for (const t of list) {
        const named = t.name.startsWith('computer_') ? 'computer_<action>' : t.name;
        expect(doc, t.name).toContain(t.name.startsWith('computer_') ? named : `\`${t.name}\``);
      }
      const start = list.find((t) => t.name === 'instance_start')!;
      expect(start.inputSchema.required).toEqual(['instance_type']);
      const bash = list.find((t) => t.name === 'ubuntu_bash')!;
      expect(Object.keys(bash.inputSchema.properties ?? {})).toEqual(
        expect.arrayContaining(['command', 'session', 'restart', 'timeout', 'instance_id']),
      );
      const click = list.find((t) => t.name === 'computer_click_mouse')!;
      expect(click.inputSchema.required).toEqual(['button']);
    } finally {
      await client.close();
    }
  });

  it('documents every error code the tools raise themselves', () => {
    const modules = (dir: string) =>
      readdirSync(new URL(`../../src/server/${dir}/`, import.meta.url)).map((f) => `${dir}/${f}`);
    const sources = ['mcp/tools.ts', 'mcp/context.ts', 'mcp/page.ts', 'http/mcp.ts']
      .concat(modules('mcp/tools'), modules('mcp/page'))
      .map((f) => readFileSync(new URL(`../../src/server/${f}`, import.meta.url), 'utf8'));
    const codes = new Set<string>();
    for (const src of sources) {
      // the code is the quoted snake_case argument before the optional status that ends the call
      for (const m of src.matchAll(/,\s*'([a-z]+_[a-z_]+)'\s*(?:,\s*\d+\s*)?,?\s*\)/g)) {
        codes.add(m[1]!);
      }
    }
    expect(codes.size).toBeGreaterThan(10);
    for (const code of codes) expect(doc, code).toContain(`\`${code}\``);
  });

  it('a tool without an instance is a tool error, not a crash', async () => {
    const { client } = await tools();
    try {
      const r = await client.callTool({ name: 'ubuntu_bash', arguments: { command: 'ls' } });
      expect(r.isError).toBe(true);
      expect(r.structuredContent).toEqual({
        error: { code: 'no_instance', message: expect.stringContaining('instance_start') },
      });
    } finally {
      await client.close();
    }
  });

  it('a browser tool without an instance starts a browser with the auto-start options', async () => {
    const asked: unknown[] = [];
    const backend = {
      start: (body: unknown) => {
        asked.push(body);
        return Promise.reject(new McpToolFailure('no room', 'capacity_exhausted', 503));
      },
    } as unknown as McpBackend;
    const session = createMcpSession({
      backend,
      version: 'test',
      autoStart: { resolution: [640, 480], blocked_domains: ['ads.example'] },
    });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await session.server.connect(a);
    const client = new Client({ name: 'doc-test', version: '1' });
    await client.connect(b);
    try {
      const r = await client.callTool({ name: 'browser_snapshot', arguments: {} });
      expect(r.isError).toBe(true);
      expect(r.structuredContent).toEqual({
        error: { code: 'capacity_exhausted', message: 'no room', status: 503 },
      });
      expect(asked).toEqual([
        { instance_type: 'browser', resolution: [640, 480], blocked_domains: ['ads.example'] },
      ]);
      // closing the browser of a session that has none is not an error
      const closed = await client.callTool({ name: 'browser_close', arguments: {} });
      expect(closed.isError).toBeFalsy();
    } finally {
      await client.close();
    }
  });

  it('the auto-started browser gets the auth state, once, and stops with the session', async () => {
    const calls: string[] = [];
    const backend = {
      start: async () => {
        calls.push('start');
        return { id: 'i1', instance_type: 'browser', status: 'running' };
      },
      listAuthStates: async () => [{ id: 'a1', name: 'login' }],
      authenticate: async (id: string, state: string) => void calls.push(`auth ${id} ${state}`),
      cdpUrl: () => Promise.reject(new McpToolFailure('no browser here', 'browser_not_running')),
      streamUrl: () => Promise.reject(new Error('no live view')),
      stop: async (id: string) => void calls.push(`stop ${id}`),
    } as unknown as McpBackend;
    const session = createMcpSession({
      backend,
      version: 'test',
      autoStart: { auth_state: 'login' },
    });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await session.server.connect(a);
    const client = new Client({ name: 'doc-test', version: '1' });
    await client.connect(b);
    try {
      // two calls at once start one browser
      const [r1, r2] = await Promise.all([
        client.callTool({ name: 'browser_snapshot', arguments: {} }),
        client.callTool({ name: 'browser_tabs', arguments: { action: 'list' } }),
      ]);
      expect(r1.structuredContent).toMatchObject({ error: { code: 'browser_not_running' } });
      expect(r2.structuredContent).toMatchObject({ error: { code: 'browser_not_running' } });
      expect(session.instances).toEqual(['i1']);
    } finally {
      await client.close();
      await session.close();
    }
    expect(calls).toEqual(['start', 'auth i1 a1', 'stop i1']);
  });
});
