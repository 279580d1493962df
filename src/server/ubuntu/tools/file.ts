/**
 * The `file` tool: the 17 commands of COMPAT.md's table. Its file operations run inside the
 * sandbox as the instance's user (fsops.ts, ../../toolbox/toolbox.ts): the kernel resolves paths in
 * the instance's view and applies its permissions. Every failure is a 200 with `error`; writes
 * are atomic. `grep` runs `grep -P` inside the sandbox too, as its own process with a deadline,
 * so a pathological pattern can only burn a sandboxed process, never the server's event loop.
 */
import { existsSync } from 'node:fs';
import { posix } from 'node:path';
import { FILE_COMMANDS, type FileRequest, type ToolResult } from '../../../api/index.js';
import type { ExecResult } from '../../sandbox/index.js';
import { failureText, isToolFailure, ToolFailure } from '../../computer/failure.js';
import {
  checkViewRange,
  listingNote,
  MAX_NUMBERED_BYTES,
  MAX_NUMBERED_LINES,
  MAX_READ_BYTES,
  MAX_TEXT_BYTES,
  type InstanceFiles,
  type Stat,
} from '../../toolbox/fsops.js';
import type { Lines, LinesAsk } from '../../toolbox/files.js';
import { countSliced, lineStart, lineStarts, replaceAllSliced } from '../../toolbox/text-scan.js';
import { isUnder } from '../../toolbox/paths.js';

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
    readonly files: InstanceFiles,
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
      return { error: failureText(err, path === undefined ? undefined : this.files.display(path)) };
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
    const path = need(req, 'path');
    const binary = mode(req) === 'binary';
    const enc = binary ? 'utf8' : encoding(req);
    if (req.line_numbers && !binary) {
      const got = await this.#numbered(path, {
        max: MAX_READ_BYTES,
        strict: false,
        encoding: enc as NonNullable<LinesAsk['encoding']>,
      });
      return withStop(got, 1);
    }
    const { data } = await this.files.readBytes(path, MAX_READ_BYTES);
    if (binary) return { output: data.toString('base64'), system: 'binary' };
    return { output: data.toString(enc) };
  }

  async #write(req: Req, append: boolean): Promise<ToolResult> {
    const content = need(req, 'content');
    const data = mode(req) === 'binary' ? fromBase64(content) : Buffer.from(content, encoding(req));
    const t = this.files.target(need(req, 'path'));
    const { appended } = await this.files.write(t, data, { append });
    return {
      output: appended
        ? `Appended ${data.length} bytes to ${t.display}`
        : `Wrote ${data.length} bytes to ${t.display}`,
    };
  }

  async #delete(req: Req): Promise<ToolResult> {
    const t = this.files.target(need(req, 'path'));
    await this.files
      .remove(t, { recursive: req.recursive ?? false })
      .catch(notEmpty(t.display, 'set recursive: true to delete it with its contents'));
    return { output: `Deleted ${t.display}` };
  }

  async #exists(req: Req): Promise<ToolResult> {
    const st = await this.files.stat(need(req, 'path'));
    return { output: st.type ? 'True' : 'False' };
  }

  async #list(req: Req): Promise<ToolResult> {
    return listed(await this.files.list(req.path ?? '.'));
  }

  async #mkdir(req: Req): Promise<ToolResult> {
    const t = this.files.target(need(req, 'path'));
    await this.files.mkdir(t).catch((err: unknown) => {
      if (isToolFailure(err) && err.code === 'EEXIST')
        throw new ToolFailure(`File exists and is not a directory: ${t.display}`);
      throw err;
    });
    return { output: `Created directory ${t.display}` };
  }

  async #rmdir(req: Req): Promise<ToolResult> {
    const t = this.files.target(need(req, 'path'));
    await this.files
      .remove(t, { dirOnly: true })
      .catch(notEmpty(t.display, 'use delete with recursive: true to remove it with its contents'));
    return { output: `Removed directory ${t.display}` };
  }

  async #moveOrCopy(req: Req, op: 'move' | 'copy'): Promise<ToolResult> {
    const srcIn = need(req, 'src');
    const dstIn = need(req, 'dst');
    // move acts on a symlink itself, copy on what it points to
    const src = await this.files.stat(srcIn, op === 'copy');
    if (!src.type) throw new ToolFailure(`No such file or directory: ${src.display}`);
    const shown = this.files.display(dstIn);
    const dst = await this.files.stat(dstIn);
    const into = dst.type === 'dir';
    const target = await this.files.stat(
      into ? posix.join(dst.path, posix.basename(src.path)) : dstIn,
      false,
    );
    if (target.path === src.path)
      throw new ToolFailure(`${src.display} and ${shown} are the same file`);
    if (src.type === 'dir' && isUnder(target.path, src.path))
      throw new ToolFailure(`Cannot ${op} ${src.display} into itself`);
    if (target.type === 'dir')
      throw new ToolFailure(`Destination exists and is a directory: ${shown}`);
    const to = { path: target.path, display: shown };
    if (op === 'move') {
      await this.files.move({ path: src.path, display: src.display }, to);
      return { output: `Moved ${src.display} to ${shown}` };
    }
    if (src.type === 'dir' && target.type) throw new ToolFailure(`Destination exists: ${shown}`);
    if (src.type !== 'dir' && src.type !== 'file')
      throw new ToolFailure(`${src.display} is not a regular file`);
    await this.files.copy({ path: src.path, display: src.display }, to);
    return { output: `Copied ${src.display} to ${shown}` };
  }

  async #view(req: Req): Promise<ToolResult> {
    const st = await this.files.stat(need(req, 'path'));
    if (!st.type) throw new ToolFailure(`No such file or directory: ${st.display}`);
    if (st.type === 'dir') return listed(await this.files.list(st));
    const [a, b] = req.view_range?.length ? [req.view_range[0]!, req.view_range[1]!] : [1, -1];
    const got = await this.#numbered(st, { max: MAX_TEXT_BYTES, strict: true, first: a, last: b });
    if (req.view_range?.length) checkViewRange(req.view_range, got.lines);
    return withStop(got, a);
  }

  /** Lines numbered by the toolbox, at most `MAX_NUMBERED_LINES` and `MAX_NUMBERED_BYTES`. */
  #numbered(
    input: string | Stat,
    ask: Pick<LinesAsk, 'max' | 'strict' | 'encoding'> & { first?: number; last?: number },
  ): Promise<Lines> {
    return this.files.lines(input, {
      first: 1,
      last: -1,
      ...ask,
      maxLines: MAX_NUMBERED_LINES,
      maxBytes: MAX_NUMBERED_BYTES,
      phantom: false,
      number: true,
    });
  }

  async #create(req: Req): Promise<ToolResult> {
    const t = this.files.target(need(req, 'path'));
    await this.files.write(t, req.content ?? '', { exclusive: true }).catch((err: unknown) => {
      if (isToolFailure(err) && err.code === 'EEXIST')
        throw new ToolFailure(`File already exists at: ${t.display}`);
      throw err;
    });
    return { output: `File created successfully at: ${t.display}` };
  }

  async #replace(req: Req): Promise<ToolResult> {
    const oldStr = need(req, 'old_str');
    if (oldStr === '') throw new ToolFailure('`old_str` must not be empty');
    const newStr = req.new_str ?? '';
    const { t, content } = await this.#editable(req);
    const found = await countSliced(content, oldStr);
    if (found === 0) {
      throw new ToolFailure(
        `No replacement was performed, old_str \`${oldStr}\` did not appear verbatim in ${t.display}.`,
      );
    }
    const at = content.indexOf(oldStr);
    const updated = req.all_occurrences
      ? await replaceAllSliced(content, oldStr, newStr)
      : content.slice(0, at) + newStr + content.slice(at + oldStr.length);
    const count = req.all_occurrences ? found : 1;
    await this.#save(t, content, updated);
    return {
      output: `Replaced ${count} occurrence${count === 1 ? '' : 's'} of old_str in ${t.display}`,
    };
  }

  async #insert(req: Req): Promise<ToolResult> {
    const line = need(req, 'line');
    const text = need(req, 'text');
    const { t, content } = await this.#editable(req);
    const count = await lineCount(content);
    if (line < 1 || line > count + 1) {
      throw new ToolFailure(
        `Invalid line ${line}: it should be within the range [1, ${count + 1}] for ${t.display}`,
      );
    }
    const added = text.endsWith('\n') ? text : `${text}\n`;
    const addedLines = await countSliced(added, '\n');
    // before line `line`: where it starts; after a last line without its newline, one first
    const at = line === count + 1 ? content.length : await lineStart(content, line - 1);
    const updated =
      at === content.length && content !== '' && !content.endsWith('\n')
        ? `${content}\n${added.slice(0, -1)}`
        : content.slice(0, at) + added + content.slice(at);
    await this.#save(t, content, updated);
    return {
      output: `Inserted ${addedLines} line${addedLines === 1 ? '' : 's'} at line ${line} of ${t.display}`,
    };
  }

  async #deleteLines(req: Req): Promise<ToolResult> {
    const wanted = need(req, 'lines');
    if (wanted.length === 0) throw new ToolFailure('`lines` must not be empty');
    const { t, content } = await this.#editable(req);
    const count = await lineCount(content);
    const bad = wanted.filter((n) => n < 1 || n > count);
    if (bad.length) {
      throw new ToolFailure(
        `Invalid line numbers [${bad.join(', ')}]: ${t.display} has ${count} lines`,
      );
    }
    const drop = new Set(wanted);
    const trailing = content.endsWith('\n');
    // the runs of kept lines [from, n), each one slice of the text, found in one pass
    const bounds: [number, number][] = [];
    let from = 1;
    for (const n of [...[...drop].sort((x, y) => x - y), count + 1]) {
      if (n > from) bounds.push([from, n]);
      from = n + 1;
    }
    const wantedStarts = [...new Set(bounds.flat())].sort((x, y) => x - y);
    const found = await lineStarts(
      content,
      wantedStarts.map((n) => n - 1),
    );
    const at = new Map(wantedStarts.map((n, i) => [n, found[i]!]));
    const runs = bounds.map(([a, n]) => {
      const next = n > count ? -1 : at.get(n)!;
      return content.slice(
        at.get(a)!,
        next === -1 ? content.length - (trailing ? 1 : 0) : next - 1,
      );
    });
    const updated = runs.length === 0 ? '' : runs.join('\n') + (trailing ? '\n' : '');
    await this.#save(t, content, updated);
    return { output: `Deleted ${drop.size} line${drop.size === 1 ? '' : 's'} from ${t.display}` };
  }

  async #undo(req: Req): Promise<ToolResult> {
    const st = await this.files.stat(need(req, 'path'));
    const previous = this.#history.get(st.path)?.pop();
    if (previous === undefined) throw new ToolFailure(`No edit history found for ${st.display}.`);
    await this.files.write({ path: st.path, display: st.display }, previous);
    return { output: `Last edit to ${st.display} undone successfully.` };
  }

  async #grep(req: Req): Promise<ToolResult> {
    const pattern = need(req, 'pattern');
    const st = await this.files.stat(req.path ?? '.');
    if (!st.type) throw new ToolFailure(`No such file or directory: ${st.display}`);
    if (st.type === 'dir' && !req.recursive) {
      throw new ToolFailure(`${st.display} is a directory; set recursive: true to search it`);
    }
    const argv = [GREP, '-P', '-I', '-H', '--color=never'];
    if (req.line_numbers ?? true) argv.push('-n');
    if (req.case_sensitive === false) argv.push('-i');
    if (req.recursive) argv.push('-r');
    argv.push('-e', pattern, '--', st.path);
    const res = await this.exec(argv, GREP_TIMEOUT_MS);
    if (res.timedOut)
      throw new ToolFailure(`grep took longer than ${GREP_TIMEOUT_MS / 1000} s and was stopped`);
    const out = res.stdout.toString('utf8');
    if (res.code === 1 || (res.code === 0 && out === '')) return { output: 'No matches found' };
    if (res.code !== 0 && out === '') {
      throw new ToolFailure(
        res.stderr.toString('utf8').trim() || `grep failed (status ${res.code})`,
      );
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

  /** A UTF-8 file to edit: its canonical path (history key), display and contents. */
  async #editable(req: Req): Promise<{ t: Stat; content: string }> {
    const st = await this.files.stat(need(req, 'path'));
    if (!st.type) throw new ToolFailure(`No such file or directory: ${st.display}`);
    const { text } = await this.files.readText(st);
    return { t: st, content: text };
  }

  async #save(t: Stat, before: string, after: string): Promise<void> {
    await this.files.write({ path: t.path, display: t.display }, after);
    const stack = this.#history.get(t.path) ?? [];
    stack.push(before);
    if (stack.length > MAX_HISTORY) stack.shift();
    this.#history.set(t.path, stack);
  }
}

function need<K extends keyof Req>(req: Req, key: K): NonNullable<Req[K]> {
  const v = req[key];
  if (v === undefined || v === null)
    throw new ToolFailure(`Parameter \`${String(key)}\` is required for command: ${req.command}`);
  return v as NonNullable<Req[K]>;
}

function mode(req: Req): 'text' | 'binary' {
  const m = req.mode ?? 'text';
  if (m !== 'text' && m !== 'binary')
    throw new ToolFailure(`Invalid mode '${m}': use 'text' or 'binary'`);
  return m;
}

function encoding(req: Req): BufferEncoding {
  const name = (req.encoding ?? 'utf-8').toLowerCase().replaceAll('_', '-');
  const enc = ENCODINGS[name];
  if (!enc)
    throw new ToolFailure(
      `Unsupported encoding '${req.encoding}'. Supported: ${Object.keys(ENCODINGS).join(', ')}`,
    );
  return enc;
}

function fromBase64(s: string): Buffer {
  const clean = s.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) {
    throw new ToolFailure('`content` is not valid base64 (binary mode expects base64)');
  }
  return Buffer.from(clean, 'base64');
}

/** Lines of a text, without a phantom empty line after the final newline. */
async function lineCount(content: string): Promise<number> {
  if (content === '') return 0;
  return (await countSliced(content, '\n')) + (content.endsWith('\n') ? 0 : 1);
}

/** A directory listing, with what was left out past `MAX_LIST_ENTRIES`. */
function listed({ names, total }: { names: string[]; total: number }): ToolResult {
  const note = listingNote(names.length, total);
  return note ? { output: names.join('\n'), system: note } : { output: names.join('\n') };
}

/** Numbered lines from line `first`, with where they stop when the bounds cut them. */
function withStop(got: Lines, first: number): ToolResult {
  if (!got.cut) return { output: got.text };
  const last = first + got.sent - 1;
  return {
    output: got.text,
    system: `output truncated: showing lines ${first}-${last} of ${got.lines} (at most ${MAX_NUMBERED_LINES} lines and ${MAX_NUMBERED_BYTES} bytes an answer); use view with view_range [${last + 1}, ...] for more`,
  };
}

function notEmpty(display: string, hint: string) {
  return (err: unknown): never => {
    if (isToolFailure(err) && (err.code === 'ENOTEMPTY' || err.code === 'EEXIST'))
      throw new ToolFailure(`Directory not empty: ${display} (${hint})`);
    throw err;
  };
}
