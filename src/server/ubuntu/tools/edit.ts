/**
 * The `edit` tool: the well-known `str_replace_editor` semantics and messages (view, create,
 * str_replace, insert, undo_edit). COMPAT decisions: relative paths resolve against home;
 * `insert` accepts `file_text` when `new_str` is absent; tabs are preserved (no expandtabs).
 * Paths in messages are the requested path made absolute. The file operations run inside the
 * sandbox as the instance's user (fsops.ts).
 */
import { posix } from 'node:path';
import type { EditRequest, ToolResult } from '../../../api/index.js';
import {
  checkViewRange,
  listingNote,
  MAX_TEXT_BYTES,
  numbered,
  pyList,
  type InstanceFiles,
  type Stat,
} from '../../toolbox/fsops.js';
import { countSliced, lineSlice, lineStart, linesHolding } from '../../toolbox/text-scan.js';
import { failureText, isToolFailure, ToolFailure } from '../../computer/failure.js';

const SNIPPET_LINES = 4;
const MAX_RESPONSE_LEN = 16_000;
const TRUNCATED_MESSAGE =
  '<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry this tool after you have searched inside the file with `grep -n` in order to find the line numbers of what you are looking for.</NOTE>';
/**
 * Line numbers a "multiple occurrences" refusal names at most (a file of 32 million matching
 * lines would make an answer of hundreds of MB).
 */
const MAX_NAMED_LINES = 100;
/** Undo steps kept per file. */
const MAX_HISTORY = 32;

export class EditTool {
  readonly #history = new Map<string, string[]>();

  constructor(readonly files: InstanceFiles) {}

  async run(req: EditRequest): Promise<ToolResult> {
    try {
      return await this.#run(req);
    } catch (err) {
      return { error: failureText(err, this.files.display(req.path)) };
    }
  }

  async #run(req: EditRequest): Promise<ToolResult> {
    const r = await this.files.stat(req.path);
    const p = r.display;
    if (!r.type && req.command !== 'create') {
      throw new ToolFailure(`The path ${p} does not exist. Please provide a valid path.`);
    }
    if (r.type && req.command === 'create') {
      throw new ToolFailure(
        `File already exists at: ${p}. Cannot overwrite files using command \`create\`.`,
      );
    }
    if (r.type === 'dir' && req.command !== 'view') {
      throw new ToolFailure(
        `The path ${p} is a directory and only the \`view\` command can be used on directories`,
      );
    }
    switch (req.command) {
      case 'view':
        return this.#view(r, req.view_range);
      case 'create': {
        if (req.file_text === undefined)
          throw new ToolFailure('Parameter `file_text` is required for command: create');
        await this.#write(r, req.file_text);
        this.#push(r, req.file_text);
        return { output: `File created successfully at: ${p}` };
      }
      case 'str_replace': {
        if (req.old_str === undefined)
          throw new ToolFailure('Parameter `old_str` is required for command: str_replace');
        return this.#strReplace(r, req.old_str, req.new_str ?? '');
      }
      case 'insert': {
        if (req.insert_line === undefined)
          throw new ToolFailure('Parameter `insert_line` is required for command: insert');
        const text = req.new_str ?? req.file_text;
        if (text === undefined)
          throw new ToolFailure('Parameter `new_str` is required for command: insert');
        return this.#insert(r, req.insert_line, text);
      }
      case 'undo_edit':
        return this.#undo(r);
    }
  }

  async #view(r: Stat, range: readonly number[] | undefined): Promise<ToolResult> {
    const p = r.display;
    if (r.type === 'dir') {
      if (range?.length)
        throw new ToolFailure(
          'The `view_range` parameter is not allowed when `path` points to a directory.',
        );
      const { entries, total } = await this.files.tree(r, 2);
      const lines = [p, ...entries.map((rel) => posix.join(p, rel))];
      const note = listingNote(entries.length, total);
      return {
        output: `Here's the files and directories up to 2 levels deep in ${p}, excluding hidden items:\n${lines.join('\n')}\n\n${note ? `<NOTE>${note}</NOTE>\n` : ''}`,
      };
    }
    // the toolbox picks the range and cuts it to what is shown: MAX_RESPONSE_LEN characters
    // are at most that many + 1 lines and 4 bytes a character
    const [a, b] = range?.length ? [range[0]!, range[1]!] : [1, -1];
    const got = await this.files.lines(r, {
      max: MAX_TEXT_BYTES,
      first: a,
      last: b,
      maxLines: MAX_RESPONSE_LEN + 1,
      maxBytes: 4 * MAX_RESPONSE_LEN + 4,
      phantom: true,
      number: false,
      strict: true,
    });
    if (range?.length) checkViewRange(range, got.lines);
    return { output: makeOutput(got.text, p, a, got.cut) };
  }

  async #strReplace(r: Stat, oldStr: string, newStr: string): Promise<ToolResult> {
    const p = r.display;
    const content = (await this.files.readText(r)).text;
    const occurrences = await countSliced(content, oldStr);
    if (occurrences === 0) {
      throw new ToolFailure(
        `No replacement was performed, old_str \`${oldStr}\` did not appear verbatim in ${p}.`,
      );
    }
    if (occurrences > 1) {
      // a line cannot hold an old_str with a newline: the well-known tool names no line then
      const { lines, total } = oldStr.includes('\n')
        ? { lines: [], total: 0 }
        : await linesHolding(content, oldStr, MAX_NAMED_LINES);
      const more = total > lines.length ? ` (and ${total - lines.length} more lines)` : '';
      throw new ToolFailure(
        `No replacement was performed. Multiple occurrences of old_str \`${oldStr}\` in lines ${pyList(lines)}${more}. Please ensure it is unique`,
      );
    }
    const at = content.indexOf(oldStr);
    const updated = content.slice(0, at) + newStr + content.slice(at + oldStr.length);
    await this.#write(r, updated);
    this.#push(r, content);
    const replacementLine = await countSliced(content.slice(0, at), '\n');
    const start = Math.max(0, replacementLine - SNIPPET_LINES);
    const end = replacementLine + SNIPPET_LINES + (await countSliced(newStr, '\n'));
    const snippet = await lineSlice(updated, start, end + 1);
    return {
      output:
        `The file ${p} has been edited. ` +
        makeOutput(snippet, `a snippet of ${p}`, start + 1) +
        'Review the changes and make sure they are as expected. Edit the file again if necessary.',
    };
  }

  async #insert(r: Stat, line: number, text: string): Promise<ToolResult> {
    const p = r.display;
    const content = (await this.files.readText(r)).text;
    const count = (await countSliced(content, '\n')) + 1;
    if (line < 0 || line > count) {
      throw new ToolFailure(
        `Invalid \`insert_line\` parameter: ${line}. It should be within the range of lines of the file: ${pyList([0, count])}`,
      );
    }
    // after line `line`: at the newline that ends it, or before everything
    const end =
      line === 0 ? 0 : line === count ? content.length : (await lineStart(content, line)) - 1;
    const updated =
      line === 0 ? `${text}\n${content}` : `${content.slice(0, end)}\n${text}${content.slice(end)}`;
    const added = (await countSliced(text, '\n')) + 1;
    const first = Math.max(0, line - SNIPPET_LINES);
    const snippet = await lineSlice(updated, first, line + added + SNIPPET_LINES);
    await this.#write(r, updated);
    this.#push(r, content);
    return {
      output:
        `The file ${p} has been edited. ` +
        makeOutput(snippet, 'a snippet of the edited file', Math.max(1, line - SNIPPET_LINES + 1)) +
        'Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.',
    };
  }

  async #undo(r: Stat): Promise<ToolResult> {
    const stack = this.#history.get(r.path);
    const previous = stack?.pop();
    if (previous === undefined) throw new ToolFailure(`No edit history found for ${r.display}.`);
    await this.#write(r, previous);
    return {
      output: `Last edit to ${r.display} undone successfully. ${makeOutput(previous, r.display)}`,
    };
  }

  async #write(r: Stat, content: string): Promise<void> {
    try {
      await this.files.write({ path: r.path, display: r.display }, content);
    } catch (err) {
      // the well-known wording for a system error; refusals (read-only, hidden) as they are
      if (isToolFailure(err) && /^E[A-Z]+$/.test(err.code ?? '') && err.code !== 'EROFS')
        throw new ToolFailure(`Ran into ${err.reason} while trying to write to ${r.display}`);
      throw err;
    }
  }

  #push(r: Stat, content: string): void {
    const stack = this.#history.get(r.path) ?? [];
    stack.push(content);
    if (stack.length > MAX_HISTORY) stack.shift();
    this.#history.set(r.path, stack);
  }
}

/** `cat -n` of (a part of) a file, as the well-known editor tool prints it. */
function makeOutput(content: string, descriptor: string, first = 1, cut = false): string {
  const clipped =
    cut || content.length > MAX_RESPONSE_LEN
      ? content.slice(0, MAX_RESPONSE_LEN) + TRUNCATED_MESSAGE
      : content;
  return `Here's the result of running \`cat -n\` on ${descriptor}:\n${numbered(clipped, first)}\n`;
}
