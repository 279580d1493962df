/**
 * src/server/mcp/TOOLS.md names every tool the MCP session registers and every error code the
 * tools raise of their own; the tools' JSON schemas come from the zod contract (required fields
 * included). The session runs over the SDK's in-memory transport, no sockets.
 */
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { describe, expect, it } from 'vitest';
import type { McpBackend } from '../../src/server/mcp/backend.js';
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
    const sources = ['mcp/tools.ts', 'mcp/page.ts', 'http/mcp.ts'].map((f) =>
      readFileSync(new URL(`../../src/server/${f}`, import.meta.url), 'utf8'),
    );
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
      const r = await client.callTool({ name: 'browser_snapshot', arguments: {} });
      expect(r.isError).toBe(true);
      expect(r.structuredContent).toEqual({
        error: { code: 'no_instance', message: expect.stringContaining('instance_start') },
      });
    } finally {
      await client.close();
    }
  });
});
