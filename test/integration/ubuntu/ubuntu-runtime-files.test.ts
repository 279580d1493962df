/**
 * The ubuntu runtime's edit and file tools driven directly (no HTTP) in its sandbox: their
 * commands and well-known messages, and the paths they refuse (outside home and tmp, through
 * symlinks bash planted), as ../../src/server/sandbox/ISOLATION.md promises.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UbuntuRuntime } from '../../../src/server/ubuntu/index.js';
import { startInstance, stopChecked, toolsOf, type Instance } from './ubuntu-runtime-harness.js';

describe('ubuntu runtime in its sandbox', () => {
  let inst: Instance;
  let rt: UbuntuRuntime;
  const { bash, edit, file, home } = toolsOf(() => inst);

  beforeAll(async () => {
    inst = await startInstance();
    rt = inst.rt;
  });

  afterAll(() => stopChecked(inst));

  describe('edit', () => {
    it('create, view, str_replace, insert and undo_edit with the well-known messages', async () => {
      const p = '/home/user/e/a.py';
      expect(
        (await edit({ command: 'create', path: 'e/a.py', file_text: 'one\n\ttwo\nthree\n' }))
          .output,
      ).toBe(`File created successfully at: ${p}`);
      expect(readFileSync(join(home(), 'e/a.py'), 'utf8')).toBe('one\n\ttwo\nthree\n');
      expect((await edit({ command: 'create', path: p, file_text: 'x' })).error).toBe(
        `File already exists at: ${p}. Cannot overwrite files using command \`create\`.`,
      );
      expect((await edit({ command: 'view', path: p })).output).toBe(
        `Here's the result of running \`cat -n\` on ${p}:\n     1\tone\n     2\t\ttwo\n     3\tthree\n     4\t\n`,
      );
      expect((await edit({ command: 'view', path: p, view_range: [2, -1] })).output).toBe(
        `Here's the result of running \`cat -n\` on ${p}:\n     2\t\ttwo\n     3\tthree\n     4\t\n`,
      );
      const replaced = await edit({
        command: 'str_replace',
        path: p,
        old_str: '\ttwo',
        new_str: '\t2',
      });
      expect(replaced.output).toBe(
        `The file ${p} has been edited. Here's the result of running \`cat -n\` on a snippet of ${p}:\n     1\tone\n     2\t\t2\n     3\tthree\n     4\t\nReview the changes and make sure they are as expected. Edit the file again if necessary.`,
      );
      expect((await edit({ command: 'str_replace', path: p, old_str: 'nope' })).error).toBe(
        `No replacement was performed, old_str \`nope\` did not appear verbatim in ${p}.`,
      );
      expect((await edit({ command: 'str_replace', path: p, old_str: 'e' })).error).toBe(
        `No replacement was performed. Multiple occurrences of old_str \`e\` in lines [1, 3]. Please ensure it is unique`,
      );
      const inserted = await edit({ command: 'insert', path: p, insert_line: 1, new_str: 'ins' });
      expect(inserted.output).toBe(
        `The file ${p} has been edited. Here's the result of running \`cat -n\` on a snippet of the edited file:\n     1\tone\n     2\tins\n     3\t\t2\n     4\tthree\n     5\t\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.`,
      );
      expect(
        (await edit({ command: 'insert', path: p, insert_line: 0, file_text: 'top' })).output,
      ).toContain('     1\ttop\n');
      expect(
        (await edit({ command: 'insert', path: p, insert_line: 99, new_str: 'x' })).error,
      ).toBe(
        'Invalid `insert_line` parameter: 99. It should be within the range of lines of the file: [0, 6]',
      );
      expect((await edit({ command: 'undo_edit', path: p })).output).toBe(
        `Last edit to ${p} undone successfully. Here's the result of running \`cat -n\` on ${p}:\n     1\tone\n     2\tins\n     3\t\t2\n     4\tthree\n     5\t\n`,
      );
      await edit({ command: 'undo_edit', path: p });
      await edit({ command: 'undo_edit', path: p });
      expect(readFileSync(join(home(), 'e/a.py'), 'utf8')).toBe('one\n\ttwo\nthree\n');
      await edit({ command: 'undo_edit', path: p }); // the create
      expect((await edit({ command: 'undo_edit', path: p })).error).toBe(
        `No edit history found for ${p}.`,
      );
    });

    it('validates parameters and view_range with the well-known messages', async () => {
      const p = '/home/user/e/b.txt';
      await edit({ command: 'create', path: p, file_text: 'a\nb\nc' });
      const cases: [Parameters<typeof edit>[0], string][] = [
        [
          { command: 'view', path: '/home/user/nope' },
          'The path /home/user/nope does not exist. Please provide a valid path.',
        ],
        [
          { command: 'create', path: 'e/x' },
          'Parameter `file_text` is required for command: create',
        ],
        [
          { command: 'str_replace', path: p },
          'Parameter `old_str` is required for command: str_replace',
        ],
        [
          { command: 'insert', path: p, new_str: 'x' },
          'Parameter `insert_line` is required for command: insert',
        ],
        [
          { command: 'insert', path: p, insert_line: 1 },
          'Parameter `new_str` is required for command: insert',
        ],
        [
          { command: 'view', path: p, view_range: [1] },
          'Invalid `view_range`. It should be a list of two integers.',
        ],
        [
          { command: 'view', path: p, view_range: [0, 2] },
          'Invalid `view_range`: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 3]',
        ],
        [
          { command: 'view', path: p, view_range: [1, 9] },
          'Invalid `view_range`: [1, 9]. Its second element `9` should be smaller than the number of lines in the file: `3`',
        ],
        [
          { command: 'view', path: p, view_range: [3, 2] },
          'Invalid `view_range`: [3, 2]. Its second element `2` should be larger or equal than its first `3`',
        ],
        [
          { command: 'str_replace', path: 'e', old_str: 'x' },
          'The path /home/user/e is a directory and only the `view` command can be used on directories',
        ],
        [
          { command: 'view', path: 'e', view_range: [1, 2] },
          'The `view_range` parameter is not allowed when `path` points to a directory.',
        ],
      ];
      for (const [req, message] of cases) expect((await edit(req)).error).toBe(message);
    });

    it('views a directory two levels deep without hidden items', async () => {
      mkdirSync(join(home(), 'tree/sub/deeper'), { recursive: true });
      writeFileSync(join(home(), 'tree/sub/deeper/x'), '');
      writeFileSync(join(home(), 'tree/f.txt'), '');
      writeFileSync(join(home(), 'tree/.hidden'), '');
      const r = await edit({ command: 'view', path: 'tree' });
      expect(r.output).toBe(
        "Here's the files and directories up to 2 levels deep in /home/user/tree, excluding hidden items:\n" +
          '/home/user/tree\n/home/user/tree/f.txt\n/home/user/tree/sub\n/home/user/tree/sub/deeper\n\n',
      );
    });
  });

  describe('file', () => {
    it('read, write, append, exists, create and binary mode', async () => {
      expect((await file({ command: 'write', path: 'f/one.txt', content: 'héllo\n' })).output).toBe(
        'Wrote 7 bytes to /home/user/f/one.txt',
      );
      expect((await file({ command: 'append', path: 'f/one.txt', content: 'more\n' })).output).toBe(
        'Appended 5 bytes to /home/user/f/one.txt',
      );
      expect((await file({ command: 'read', path: '/home/user/f/one.txt' })).output).toBe(
        'héllo\nmore\n',
      );
      expect((await file({ command: 'read', path: 'f/one.txt', line_numbers: true })).output).toBe(
        '     1\théllo\n     2\tmore',
      );
      expect((await file({ command: 'read', path: 'f/one.txt', encoding: 'latin-1' })).output).toBe(
        'hÃ©llo\nmore\n',
      );
      const bin = await file({ command: 'read', path: 'f/one.txt', mode: 'binary' });
      expect(bin).toEqual({
        output: Buffer.from('héllo\nmore\n').toString('base64'),
        system: 'binary',
      });
      await file({
        command: 'write',
        path: 'f/b.bin',
        mode: 'binary',
        content: Buffer.from([0, 255, 1]).toString('base64'),
      });
      expect([...readFileSync(join(home(), 'f/b.bin'))]).toEqual([0, 255, 1]);
      expect(
        (await file({ command: 'write', path: 'f/b.bin', mode: 'binary', content: '@@' })).error,
      ).toMatch(/not valid base64/);
      expect((await file({ command: 'exists', path: 'f/one.txt' })).output).toBe('True');
      expect((await file({ command: 'exists', path: 'f/none' })).output).toBe('False');
      expect((await file({ command: 'create', path: 'f/new.txt', content: 'n' })).output).toBe(
        'File created successfully at: /home/user/f/new.txt',
      );
      expect((await file({ command: 'create', path: 'f/new.txt', content: 'n' })).error).toMatch(
        /File already exists at: \/home\/user\/f\/new.txt/,
      );
      expect((await file({ command: 'read', path: 'f/none' })).error).toBe(
        'No such file or directory: /home/user/f/none',
      );
      expect((await file({ command: 'write', path: 'f/x' })).error).toBe(
        'Parameter `content` is required for command: write',
      );
      expect((await file({ command: 'read', path: 'f/one.txt', mode: 'weird' })).error).toMatch(
        /Invalid mode/,
      );
    });

    it('list, mkdir, rmdir, delete, move and copy', async () => {
      expect((await file({ command: 'mkdir', path: 'g/a/b' })).output).toBe(
        'Created directory /home/user/g/a/b',
      );
      expect((await file({ command: 'mkdir', path: 'g/a/b' })).output).toBe(
        'Created directory /home/user/g/a/b',
      );
      await file({ command: 'write', path: 'g/z.txt', content: 'z' });
      await file({ command: 'write', path: 'g/a/in.txt', content: 'i' });
      expect((await file({ command: 'list', path: 'g' })).output).toBe('a/\nz.txt');
      expect((await file({ command: 'rmdir', path: 'g/a' })).error).toMatch(
        /^Directory not empty: \/home\/user\/g\/a/,
      );
      expect((await file({ command: 'rmdir', path: 'g/a/b' })).output).toBe(
        'Removed directory /home/user/g/a/b',
      );
      expect((await file({ command: 'move', src: 'g/z.txt', dst: 'g/moved/z2.txt' })).output).toBe(
        'Moved /home/user/g/z.txt to /home/user/g/moved/z2.txt',
      );
      expect((await file({ command: 'copy', src: 'g/moved/z2.txt', dst: 'g/a' })).output).toBe(
        'Copied /home/user/g/moved/z2.txt to /home/user/g/a',
      );
      expect(readFileSync(join(home(), 'g/a/z2.txt'), 'utf8')).toBe('z');
      expect((await file({ command: 'copy', src: 'g/a', dst: '/tmp/g-copy' })).output).toBe(
        'Copied /home/user/g/a to /tmp/g-copy',
      );
      expect(readdirSync(join(inst.rt.sandbox.hostTmp, 'g-copy')).sort()).toEqual([
        'in.txt',
        'z2.txt',
      ]);
      expect(
        (await file({ command: 'copy', src: '/etc/hostname', dst: 'g/hostname' })).output,
      ).toMatch(/^Copied/);
      expect((await file({ command: 'delete', path: 'g/a' })).error).toMatch(
        /^Directory not empty/,
      );
      expect((await file({ command: 'delete', path: 'g/a', recursive: true })).output).toBe(
        'Deleted /home/user/g/a',
      );
      expect((await file({ command: 'delete', path: 'g/moved/z2.txt' })).output).toBe(
        'Deleted /home/user/g/moved/z2.txt',
      );
      expect((await file({ command: 'list', path: 'g' })).output).toBe('hostname\nmoved/');
      expect(
        (await file({ command: 'delete', path: '/home/user', recursive: true })).error,
      ).toMatch(/Refusing to remove/);
      expect((await file({ command: 'move', src: '/etc/hostname', dst: 'h' })).error).toMatch(
        /Access denied: \/etc\/hostname is read-only/,
      );
    });

    it('view, replace, insert, delete_lines and undo', async () => {
      await file({ command: 'write', path: 't.txt', content: 'a\nb\nc\nb\n' });
      expect((await file({ command: 'view', path: 't.txt' })).output).toBe(
        '     1\ta\n     2\tb\n     3\tc\n     4\tb',
      );
      expect((await file({ command: 'view', path: 't.txt', view_range: [2, 3] })).output).toBe(
        '     2\tb\n     3\tc',
      );
      expect((await file({ command: 'view', path: 't.txt', view_range: [5, 6] })).error).toMatch(
        /^Invalid `view_range`: \[5, 6\]/,
      );
      expect(
        (await file({ command: 'replace', path: 't.txt', old_str: 'b', new_str: 'B' })).output,
      ).toBe('Replaced 1 occurrence of old_str in /home/user/t.txt');
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nB\nc\nb\n');
      expect(
        (
          await file({
            command: 'replace',
            path: 't.txt',
            old_str: '\n',
            new_str: ';',
            all_occurrences: true,
          })
        ).output,
      ).toBe('Replaced 4 occurrences of old_str in /home/user/t.txt');
      expect((await file({ command: 'replace', path: 't.txt', old_str: 'zz' })).error).toMatch(
        /did not appear verbatim/,
      );
      expect((await file({ command: 'undo', path: 't.txt' })).output).toBe(
        'Last edit to /home/user/t.txt undone successfully.',
      );
      expect((await file({ command: 'insert', path: 't.txt', line: 2, text: 'x\ny' })).output).toBe(
        'Inserted 2 lines at line 2 of /home/user/t.txt',
      );
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nx\ny\nB\nc\nb\n');
      await file({ command: 'insert', path: 't.txt', line: 7, text: 'end' });
      expect((await file({ command: 'insert', path: 't.txt', line: 9, text: 'e' })).error).toMatch(
        /Invalid line 9/,
      );
      expect(
        (await file({ command: 'delete_lines', path: 't.txt', lines: [2, 3, 7] })).output,
      ).toBe('Deleted 3 lines from /home/user/t.txt');
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nB\nc\nb\n');
      expect((await file({ command: 'delete_lines', path: 't.txt', lines: [9] })).error).toMatch(
        /Invalid line numbers \[9\]/,
      );
      await file({ command: 'undo', path: 't.txt' });
      await file({ command: 'undo', path: 't.txt' });
      await file({ command: 'undo', path: 't.txt' });
      await file({ command: 'undo', path: 't.txt' });
      expect(readFileSync(join(home(), 't.txt'), 'utf8')).toBe('a\nb\nc\nb\n');
      expect((await file({ command: 'undo', path: 't.txt' })).error).toBe(
        'No edit history found for /home/user/t.txt.',
      );
    });

    it('grep with regex, case, recursion and line numbers', async () => {
      await file({ command: 'write', path: 'gr/a.txt', content: 'Alpha 1\nbeta 22\n' });
      await file({ command: 'write', path: 'gr/sub/b.txt', content: 'alpha 333\n' });
      expect((await file({ command: 'grep', pattern: '\\d{2,}', path: 'gr/a.txt' })).output).toBe(
        '/home/user/gr/a.txt:2:beta 22',
      );
      expect((await file({ command: 'grep', pattern: 'alpha', path: 'gr' })).error).toMatch(
        /is a directory; set recursive/,
      );
      const all = await file({
        command: 'grep',
        pattern: 'alpha',
        path: 'gr',
        recursive: true,
        case_sensitive: false,
      });
      expect(all.output!.split('\n').sort()).toEqual([
        '/home/user/gr/a.txt:1:Alpha 1',
        '/home/user/gr/sub/b.txt:1:alpha 333',
      ]);
      expect(
        (await file({ command: 'grep', pattern: 'beta', path: 'gr/a.txt', line_numbers: false }))
          .output,
      ).toBe('/home/user/gr/a.txt:beta 22');
      expect(
        (await file({ command: 'grep', pattern: 'gamma', path: 'gr', recursive: true })).output,
      ).toBe('No matches found');
      expect(
        (await file({ command: 'grep', pattern: '(unclosed', path: 'gr/a.txt' })).error,
      ).toMatch(/grep/);
    });

    it('answers an unknown command with the supported ones', async () => {
      expect((await file({ command: 'frobnicate' })).error).toBe(
        "Unknown command 'frobnicate'. Supported commands: read, write, append, delete, exists, list, mkdir, rmdir, move, copy, view, create, replace, insert, delete_lines, undo, grep",
      );
    });
  });

  describe('paths', () => {
    it('refuses to write outside home and tmp, reads what the sandbox can read', async () => {
      expect((await file({ command: 'write', path: '/etc/burrow-x', content: 'x' })).error).toBe(
        'Access denied: /etc/burrow-x is read-only (writes are allowed only under /home/user and /tmp)',
      );
      expect(
        (await file({ command: 'write', path: '../../../etc/burrow-x', content: 'x' })).error,
      ).toMatch(/Access denied: \/etc\/burrow-x is read-only/);
      expect(
        (await edit({ command: 'create', path: '/usr/burrow-x', file_text: 'x' })).error,
      ).toMatch(/Access denied/);
      // the instance's generated /etc, not the host's
      expect((await file({ command: 'read', path: '/etc/hostname' })).output).toBe('burrow\n');
      expect((await file({ command: 'read', path: '/proc/self/environ' })).error).toMatch(
        /Access denied/,
      );
      expect(
        (await file({ command: 'read', path: `${inst.data}/auth_states/secret.json` })).error,
      ).toMatch(/No such file|Access denied/);
      // the host's /root does not exist inside
      expect(existsSync('/root')).toBe(true);
      expect((await file({ command: 'list', path: '/root' })).error).toBe(
        'No such file or directory: /root',
      );
      expect(existsSync('/etc/burrow-x') || existsSync('/usr/burrow-x')).toBe(false);
    });

    it('resolves symlinks planted by bash as the sandbox does, never reaching outside', async () => {
      // links to the data dir's host path: nothing is there inside (its /tmp is its own disk's)
      const secret = `${inst.data}/auth_states/secret.json`;
      await bash({
        command: `mkdir -p links && cd links && ln -sfn / root && ln -sfn /etc etc && ln -sfn ${inst.data} data && ln -sfn ${secret} secret && ln -sfn ../../../.. up && ln -sfn /home/user/links/loop loop && ln -sfn /home/user/real inhome && mkdir -p ../real && echo hi > ../real/f && cd ~`,
      });
      expect(
        (await file({ command: 'write', path: 'links/root/etc/burrow-x', content: 'x' })).error,
      ).toMatch(/Access denied: \/home\/user\/links\/root\/etc\/burrow-x is read-only/);
      expect(
        (await file({ command: 'write', path: 'links/etc/passwd', content: 'x' })).error,
      ).toMatch(/Access denied/);
      expect(
        (await file({ command: 'write', path: 'links/up/etc/burrow-x', content: 'x' })).error,
      ).toMatch(/Access denied/);
      expect((await file({ command: 'read', path: 'links/secret' })).error).toBeDefined();
      expect((await file({ command: 'read', path: 'links/secret' })).output).toBeUndefined();
      expect(
        (await file({ command: 'read', path: 'links/data/auth_states/secret.json' })).output,
      ).toBeUndefined();
      expect((await file({ command: 'read', path: 'links/loop' })).error).toMatch(
        /Too many levels of symbolic links/,
      );
      // a link inside home, absolute in sandbox terms, works
      expect((await file({ command: 'read', path: 'links/inhome/f' })).output).toBe('hi\n');
      expect((await file({ command: 'write', path: 'links/inhome/g', content: 'g' })).output).toBe(
        'Wrote 1 bytes to /home/user/links/inhome/g',
      );
      expect(readFileSync(join(home(), 'real/g'), 'utf8')).toBe('g');
      // delete removes the link, not its target
      expect((await file({ command: 'delete', path: 'links/etc' })).output).toBe(
        'Deleted /home/user/links/etc',
      );
      expect(existsSync('/etc/passwd')).toBe(true);
      expect(() => lstatSync(join(home(), 'links/etc'))).toThrow();
      // copying a directory that holds hidden paths or an instance root is refused: / always
      // holds the destination, /home holds /home/user
      expect((await file({ command: 'copy', src: '/', dst: 'rootcopy' })).error).toBe(
        'Cannot copy / into itself',
      );
      expect((await file({ command: 'copy', src: '/home', dst: '/tmp/homecopy' })).error).toBe(
        'Cannot copy /home: it contains paths this instance cannot access',
      );
      expect(existsSync(join(home(), 'rootcopy'))).toBe(false);
      expect(existsSync(join(rt.sandbox.hostTmp, 'homecopy'))).toBe(false);
      const r = await bash({ command: 'cat links/secret' });
      expect(r.output).toBe('');
      expect(readFileSync(secret, 'utf8')).toBe('{"cookie":"s3cret"}');
    });

    it('writes atomically: no temp files are left behind', async () => {
      await file({ command: 'write', path: 'atomic/x.txt', content: 'x'.repeat(100_000) });
      await edit({
        command: 'str_replace',
        path: 'atomic/x.txt',
        old_str: 'x'.repeat(100_000),
        new_str: 'y',
      });
      expect(readdirSync(join(home(), 'atomic'))).toEqual(['x.txt']);
    });
  });
});
