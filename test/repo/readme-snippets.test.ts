/**
 * Every snippet of README.md runs as pasted (issue 20 item 5). Each fenced block marked `js` or
 * `ts` is written to its own directory of a temp project that has the package (built as plain
 * JavaScript) in its node_modules and `"type": "module"`, and run against the real server this
 * file starts: JavaScript with `node`, TypeScript with tsx, the runner the README tells users to
 * install. It must exit 0 and print what its `console.log(...); // …` comments say. A block that
 * cannot run says why in the README source (`<!-- snippet: not run: why -->` on the line before
 * it); other blocks (`sh`, `json`, output) are not code to run.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../helpers/server.js';
import { builtProject, type BuiltProject } from '../e2e/fixtures/built-package.js';
import { sessionServer } from '../e2e/fixtures/session-server.js';
import { root, type Run } from '../e2e/run.js';

interface Block {
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  code: string;
  /** The reason given for not running it, if any. */
  notRun?: string;
}

const RUNNABLE: Record<string, 'node' | 'tsx'> = {
  js: 'node',
  javascript: 'node',
  mjs: 'node',
  ts: 'tsx',
  typescript: 'tsx',
  mts: 'tsx',
};
const NOT_RUN = /^<!--\s*snippet:\s*not run:\s*(.*?)\s*-->$/;

function blocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const found: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    const notRun = NOT_RUN.exec(lines[i - 1]?.trim() ?? '')?.[1];
    found.push({
      line: i + 1,
      lang: open[1]!,
      code: lines.slice(i + 1, end).join('\n') + '\n',
      ...(notRun !== undefined && { notRun }),
    });
    i = end;
  }
  return found;
}

const all = blocks(readFileSync(join(root, 'README.md'), 'utf8'));
const toRun = all.filter((b) => RUNNABLE[b.lang] && b.notRun === undefined);

const env = sessionServer('brs-');
let server: TestServer;
let project: BuiltProject;

beforeAll(async () => {
  server = env.server;
  project = await builtProject('brs-pkg-');
  writeFileSync(join(project.dir, 'package.json'), JSON.stringify({ type: 'module' }));
}, 120_000);

afterAll(() => project?.remove());

function run(cmd: string[], cwd: string, ms = 240_000): Promise<Run> {
  const child = spawn(process.execPath, cmd, {
    cwd,
    env: { ...process.env, BURROW_BASE_URL: server.url, BURROW_API_KEY: server.apiKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
  child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  return new Promise<Run>((done, fail) => {
    child.on('error', fail);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
}

describe('README.md', () => {
  it('marks every block: code to run, or a reason it is not run', () => {
    expect(toRun.length).toBeGreaterThanOrEqual(5);
    for (const b of all) {
      if (b.notRun !== undefined) expect(b.notRun, `line ${b.line}`).not.toBe('');
      // a reason on a block that would not run anyway is a mistake too
      if (b.notRun !== undefined) expect(RUNNABLE[b.lang], `line ${b.line}`).toBeDefined();
    }
    // the first snippet runs on a fresh server: it needs no saved auth state
    expect(toRun[0]!.code).not.toMatch(/authState/);
  });

  it.each(toRun.map((b) => [`${b.lang} block at line ${b.line}`, b] as const))(
    'the %s runs as pasted',
    async (_, block) => {
      const dir = join(project.dir, `line-${block.line}`);
      mkdirSync(dir, { recursive: true });
      const runner = RUNNABLE[block.lang]!;
      const file = join(dir, runner === 'node' ? 'script.mjs' : 'script.ts');
      writeFileSync(file, block.code);
      const cmd =
        runner === 'node' ? [file] : [join(project.dir, 'node_modules/tsx/dist/cli.mjs'), file];
      const out = await run(cmd, dir);
      expect(out, out.stderr).toMatchObject({ code: 0, signal: null });
      expect(out.stderr).toBe('');
      // what the snippet says it prints
      for (const [, said] of block.code.matchAll(/console\.log\(.*\);\s*\/\/ (.+)$/gm)) {
        expect(out.stdout).toContain(said!.trim());
      }
    },
    300_000,
  );
});
