/**
 * The `file` tool: the 17 commands of COMPAT.md's table, run in the server process through the
 * sandbox's view (paths.ts). Every failure is a 200 with `error`; writes are atomic.
 * `grep` is the exception: it runs `grep -P` inside the sandbox, so a pathological pattern can
 * only burn a sandboxed process with a deadline, never the server's event loop.
 */
import { existsSync } from 'node:fs';
import { cp, rename, rm, rmdir, unlink } from 'node:fs/promises';
import { dirname, posix } from 'node:path';
import { FILE_COMMANDS, type FileRequest, type ToolResult } from '../../api/index.js';
import { toolMessage } from './edit.js';
import {
  checkViewRange,
  copyFileAtomic,
  countOccurrences,
  listDir,
  MAX_READ_BYTES,
  mkdirInside,
  readBytes,
  readText,
  resolveFile,
  writeAtomic,
} from './fsops.js';
import { ToolError, type Bind, type Resolved, type SandboxView } from './paths.js';
import type { ExecResult } from './sandbox.js';

/** Characters of grep output one call returns at most. */
export const GREP_OUTPUT_CAP = 100_000;
const GREP_TIMEOUT_MS = 30_000;
const GREP = ['/usr/bin/grep', '/bin/grep'].find((p) => existsSync(p)) ?? 'grep';
const MAX_HISTORY = 32;

const ENCODINGS: Record<string, BufferEncoding> = {
  'utf-8': 'utf8',
  utf8: 'utf8',
  ascii: 'ascii',
  'us-ascii': 'ascii',
  latin1: 'latin1',
  'latin-1': 'latin1',
  'iso-8859-1': 'latin1',
  'utf-16le': 'utf16le',
  utf16le: 'utf16le',
  'utf-16': 'utf16le',
};

type Req = FileRequest;
type Exec = (argv: string[], timeoutMs: number) => Promise<ExecResult>;

export class FileTool {
  readonly #history = new Map<string, string[]>();

  constructor(
    readonly view: SandboxView,
    readonly exec: Exec,
  ) {}

  async run(req: Req): Promise<ToolResult> {
    if (!(FILE_COMMANDS as readonly string[]).includes(req.command)) {
      return {
        error: `Unknown command '${req.command}'. Supported commands: ${FILE_COMMANDS.join(', ')}`,
      };
    }
    try {
      return await this.#dispatch(req);
    } catch (err) {
      const path = req.path ?? req.src;
      return { error: toolMessage(err, path === undefined ? undefined : this.view.display(path)) };
    }
  }

  #dispatch(req: Req): Promise<ToolResult> {
    switch (req.command as (typeof FILE_COMMANDS)[number]) {
      case 'read':
        return this.#read(req);
      case 'write':
        return this.#write(req, false);
      case 'append':
        return this.#write(req, true);
      case 'delete':
        return this.#delete(req);
      case 'exists':
        return this.#exists(req);
      case 'list':
        return this.#list(req);
      case 'mkdir':
        return this.#mkdir(req);
      case 'rmdir':
        return this.#rmdir(req);
      case 'move':
        return this.#moveOrCopy(req, 'move');
      case 'copy':
        return this.#moveOrCopy(req, 'copy');
      case 'view':
        return this.#view(req);
      case 'create':
        return this.#create(req);
      case 'replace':
        return this.#replace(req);
      case 'insert':
        return this.#insert(req);
      case 'delete_lines':
        return this.#deleteLines(req);
      case 'undo':
        return this.#undo(req);
      case 'grep':
        return this.#grep(req);
    }
  }

  async #read(req: Req): Promise<ToolResult> {
    const r = await resolveFile(this.view, need(req, 'path'));
    const bytes = await readBytes(this.view, r, MAX_READ_BYTES);
    if (mode(req) === 'binary') return { output: bytes.toString('base64'), system: 'binary' };
    const text = bytes.toString(encoding(req));
    return { output: req.line_numbers ? numberLines(splitLines(text).lines) : text };
  }

  async #write(req: Req, append: boolean): Promise<ToolResult> {
    const content = need(req, 'content');
    const data = mode(req) === 'binary' ? fromBase64(content) : Buffer.from(content, encoding(req));
    const r = await this.view.resolveWritable(need(req, 'path'));
    if (append && r.stat?.isFile()) {
      const old = await readBytes(this.view, r, MAX_READ_BYTES);
      await writeAtomic(this.view, r, Buffer.concat([old, data]));
      return { output: `Appended ${data.length} bytes to ${r.display}` };
    }
    await writeAtomic(this.view, r, data);
    return { output: `Wrote ${data.length} bytes to ${r.display}` };
  }

  async #delete(req: Req): Promise<ToolResult> {
    const r = await this.#writableObject(need(req, 'path'));
    if (r.stat!.isDirectory()) {
      if (req.recursive) await rm(r.host, { recursive: true });
      else
        await rmdir(r.host).catch(
          notEmpty(r, 'set recursive: true to delete it with its contents'),
        );
    } else {
      await unlink(r.host);
    }
    return { output: `Deleted ${r.display}` };
  }

  async #exists(req: Req): Promise<ToolResult> {
    const r = await this.view.resolve(need(req, 'path'));
    return { output: r.stat ? 'True' : 'False' };
  }

  async #list(req: Req): Promise<ToolResult> {
    const r = await this.view.resolve(req.path ?? '.');
    if (!r.stat) throw new ToolError(`No such file or directory: ${r.display}`);
    if (!r.stat.isDirectory()) throw new ToolError(`Not a directory: ${r.display}`);
    return { output: (await listDir(this.view, r)).join('\n') };
  }

  async #mkdir(req: Req): Promise<ToolResult> {
    const r = await this.view.resolveWritable(need(req, 'path'));
    if (r.stat && !r.stat.isDirectory())
      throw new ToolError(`File exists and is not a directory: ${r.display}`);
    await mkdirInside(this.view, r, r.host);
    return { output: `Created directory ${r.display}` };
  }

  async #rmdir(req: Req): Promise<ToolResult> {
    const r = await this.#writableObject(need(req, 'path'));
    if (!r.stat!.isDirectory()) throw new ToolError(`Not a directory: ${r.display}`);
    await rmdir(r.host).catch(
      notEmpty(r, 'use delete with recursive: true to remove it with its contents'),
    );
    return { output: `Removed directory ${r.display}` };
  }

  async #moveOrCopy(req: Req, op: 'move' | 'copy'): Promise<ToolResult> {
    const srcIn = need(req, 'src');
    const dstIn = need(req, 'dst');
    const src = op === 'move' ? await this.#writableObject(srcIn) : await this.view.resolve(srcIn);
    if (!src.stat) throw new ToolError(`No such file or directory: ${src.display}`);
    let dst = await this.view.resolve(dstIn);
    if (dst.stat?.isDirectory())
      dst = await this.view.resolve(posix.join(dst.path, posix.basename(src.path)));
    const target = await this.view.resolveWritable(dst.path, { follow: false });
    const shown = this.view.display(dstIn);
    if (target.path === src.path)
      throw new ToolError(`${src.display} and ${shown} are the same file`);
    if (src.stat.isDirectory() && (target.path + '/').startsWith(src.path + '/')) {
      throw new ToolError(`Cannot ${op} ${src.display} into itself`);
    }
    if (target.stat?.isDirectory())
      throw new ToolError(`Destination exists and is a directory: ${shown}`);
    await mkdirInside(this.view, target, dirname(target.host));
    if (op === 'move') {
      await rename(src.host, target.host).catch(async (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EXDEV') throw err;
        await cp(src.host, target.host, {
          recursive: true,
          verbatimSymlinks: true,
          errorOnExist: true,
          force: false,
        });
        await rm(src.host, { recursive: true });
      });
      return { output: `Moved ${src.display} to ${shown}` };
    }
    if (src.stat.isDirectory()) {
      if (!this.view.walkable(src))
        throw new ToolError(
          `Cannot copy ${src.display}: it contains paths this instance cannot access`,
        );
      if (target.stat) throw new ToolError(`Destination exists: ${shown}`);
      await cp(src.host, target.host, {
        recursive: true,
        verbatimSymlinks: true,
        errorOnExist: true,
        force: false,
      });
    } else {
      if (!src.stat.isFile()) throw new ToolError(`${src.display} is not a regular file`);
      await this.view.verify(src);
      await copyFileAtomic(this.view, src.host, target);
    }
    return { output: `Copied ${src.display} to ${shown}` };
  }

  async #view(req: Req): Promise<ToolResult> {
    const r = await this.view.resolve(need(req, 'path'));
    if (!r.stat) throw new ToolError(`No such file or directory: ${r.display}`);
    if (r.stat.isDirectory()) return { output: (await listDir(this.view, r)).join('\n') };
    let { lines } = splitLines(await readText(this.view, await resolveFile(this.view, r.path)));
    let first = 1;
    if (req.view_range?.length) {
      const [a, b] = checkViewRange(req.view_range, lines.length);
      lines = lines.slice(a - 1, b === -1 ? undefined : b);
      first = a;
    }
    return { output: numberLines(lines, first) };
  }

  async #create(req: Req): Promise<ToolResult> {
    const r = await this.view.resolveWritable(need(req, 'path'));
    if (r.stat) throw new ToolError(`File already exists at: ${r.display}`);
    await writeAtomic(this.view, r, req.content ?? '');
    return { output: `File created successfully at: ${r.display}` };
  }

  async #replace(req: Req): Promise<ToolResult> {
    const oldStr = need(req, 'old_str');
    if (oldStr === '') throw new ToolError('`old_str` must not be empty');
    const newStr = req.new_str ?? '';
    const { r, content } = await this.#editable(req);
    const found = countOccurrences(content, oldStr);
    if (found === 0) {
      throw new ToolError(
        `No replacement was performed, old_str \`${oldStr}\` did not appear verbatim in ${r.display}.`,
      );
    }
    const at = content.indexOf(oldStr);
    const updated = req.all_occurrences
      ? content.split(oldStr).join(newStr)
      : content.slice(0, at) + newStr + content.slice(at + oldStr.length);
    const count = req.all_occurrences ? found : 1;
    await this.#save(r, content, updated);
    return {
      output: `Replaced ${count} occurrence${count === 1 ? '' : 's'} of old_str in ${r.display}`,
    };
  }

  async #insert(req: Req): Promise<ToolResult> {
    const line = need(req, 'line');
    const text = need(req, 'text');
    const { r, content } = await this.#editable(req);
    const { lines, trailing } = splitLines(content);
    if (line < 1 || line > lines.length + 1) {
      throw new ToolError(
        `Invalid line ${line}: it should be within the range [1, ${lines.length + 1}] for ${r.display}`,
      );
    }
    const added = splitLines(text.endsWith('\n') ? text : `${text}\n`).lines;
    const updated = joinLines(
      [...lines.slice(0, line - 1), ...added, ...lines.slice(line - 1)],
      trailing || lines.length === 0,
    );
    await this.#save(r, content, updated);
    return {
      output: `Inserted ${added.length} line${added.length === 1 ? '' : 's'} at line ${line} of ${r.display}`,
    };
  }

  async #deleteLines(req: Req): Promise<ToolResult> {
    const wanted = need(req, 'lines');
    if (wanted.length === 0) throw new ToolError('`lines` must not be empty');
    const { r, content } = await this.#editable(req);
    const { lines, trailing } = splitLines(content);
    const bad = wanted.filter((n) => n < 1 || n > lines.length);
    if (bad.length) {
      throw new ToolError(
        `Invalid line numbers [${bad.join(', ')}]: ${r.display} has ${lines.length} lines`,
      );
    }
    const drop = new Set(wanted);
    const updated = joinLines(
      lines.filter((_, i) => !drop.has(i + 1)),
      trailing,
    );
    await this.#save(r, content, updated);
    return { output: `Deleted ${drop.size} line${drop.size === 1 ? '' : 's'} from ${r.display}` };
  }

  async #undo(req: Req): Promise<ToolResult> {
    const r = await this.view.resolveWritable(need(req, 'path'));
    const previous = this.#history.get(r.path)?.pop();
    if (previous === undefined) throw new ToolError(`No edit history found for ${r.display}.`);
    await writeAtomic(this.view, r, previous);
    return { output: `Last edit to ${r.display} undone successfully.` };
  }

  async #grep(req: Req): Promise<ToolResult> {
    const pattern = need(req, 'pattern');
    const r = await this.view.resolve(req.path ?? '.');
    if (!r.stat) throw new ToolError(`No such file or directory: ${r.display}`);
    if (r.stat.isDirectory() && !req.recursive) {
      throw new ToolError(`${r.display} is a directory; set recursive: true to search it`);
    }
    const argv = [GREP, '-P', '-I', '-H', '--color=never'];
    if (req.line_numbers ?? true) argv.push('-n');
    if (req.case_sensitive === false) argv.push('-i');
    if (req.recursive) argv.push('-r');
    argv.push('-e', pattern, '--', r.path);
    const res = await this.exec(argv, GREP_TIMEOUT_MS);
    if (res.timedOut)
      throw new ToolError(`grep took longer than ${GREP_TIMEOUT_MS / 1000} s and was stopped`);
    const out = res.stdout.toString('utf8');
    if (res.code === 1 || (res.code === 0 && out === '')) return { output: 'No matches found' };
    if (res.code !== 0 && out === '') {
      throw new ToolError(res.stderr.toString('utf8').trim() || `grep failed (status ${res.code})`);
    }
    const text = out.endsWith('\n') ? out.slice(0, -1) : out;
    if (text.length > GREP_OUTPUT_CAP) {
      return {
        output: text.slice(0, GREP_OUTPUT_CAP),
        system: `output truncated to ${GREP_OUTPUT_CAP} characters; narrow the pattern or the path`,
      };
    }
    return { output: text };
  }

  /** A writable path that must exist, not followed (delete/move act on a symlink itself). */
  async #writableObject(input: string): Promise<Resolved & { bind: Bind }> {
    const r = await this.view.resolveWritable(input, { follow: false });
    if (!r.stat) throw new ToolError(`No such file or directory: ${r.display}`);
    if (r.path === r.bind.sandbox)
      throw new ToolError(
        `Refusing to remove ${r.display}: it is one of the instance's own directories`,
      );
    return r;
  }

  async #editable(req: Req): Promise<{ r: Resolved & { bind: Bind }; content: string }> {
    const r = await this.view.resolveWritable(need(req, 'path'));
    await resolveFile(this.view, r.path);
    return { r, content: await readText(this.view, r) };
  }

  async #save(r: Resolved & { bind: Bind }, before: string, after: string): Promise<void> {
    await writeAtomic(this.view, r, after);
    const stack = this.#history.get(r.path) ?? [];
    stack.push(before);
    if (stack.length > MAX_HISTORY) stack.shift();
    this.#history.set(r.path, stack);
  }
}

function need<K extends keyof Req>(req: Req, key: K): NonNullable<Req[K]> {
  const v = req[key];
  if (v === undefined || v === null)
    throw new ToolError(`Parameter \`${String(key)}\` is required for command: ${req.command}`);
  return v as NonNullable<Req[K]>;
}

function mode(req: Req): 'text' | 'binary' {
  const m = req.mode ?? 'text';
  if (m !== 'text' && m !== 'binary')
    throw new ToolError(`Invalid mode '${m}': use 'text' or 'binary'`);
  return m;
}

function encoding(req: Req): BufferEncoding {
  const name = (req.encoding ?? 'utf-8').toLowerCase().replaceAll('_', '-');
  const enc = ENCODINGS[name];
  if (!enc)
    throw new ToolError(
      `Unsupported encoding '${req.encoding}'. Supported: ${Object.keys(ENCODINGS).join(', ')}`,
    );
  return enc;
}

function fromBase64(s: string): Buffer {
  const clean = s.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) {
    throw new ToolError('`content` is not valid base64 (binary mode expects base64)');
  }
  return Buffer.from(clean, 'base64');
}

/** Lines of a text without a phantom empty line after the final newline. */
function splitLines(content: string): { lines: string[]; trailing: boolean } {
  if (content === '') return { lines: [], trailing: true };
  const trailing = content.endsWith('\n');
  return { lines: (trailing ? content.slice(0, -1) : content).split('\n'), trailing };
}

function joinLines(lines: string[], trailing: boolean): string {
  return lines.length === 0 ? '' : lines.join('\n') + (trailing ? '\n' : '');
}

function numberLines(lines: string[], first = 1): string {
  return lines.map((line, i) => `${String(i + first).padStart(6)}\t${line}`).join('\n');
}

function notEmpty(r: Resolved, hint: string) {
  return (err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOTEMPTY' || err.code === 'EEXIST')
      throw new ToolError(`Directory not empty: ${r.display} (${hint})`);
    throw err;
  };
}
