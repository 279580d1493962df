/**
 * The file tools' layer over the toolbox (src/server/toolbox/fsops.ts), with a scripted toolbox:
 * what goes to the toolbox is the path as requested (the toolbox resolves it inside the
 * sandbox); what a failure says names the path as the client wrote it (made absolute), never a
 * path the toolbox resolved to; a toolbox that is down is its own error; invalid UTF-8 is refused
 * rather than decoded lossily (an edit would corrupt the file). Also the editor tool's helpers.
 */
import { describe, expect, it } from 'vitest';
import { ToolFailure } from '../../src/server/computer/failure.js';
import {
  checkViewRange,
  countOccurrences,
  InstanceFiles,
  MAX_TEXT_BYTES,
  numbered,
  pyList,
} from '../../src/server/toolbox/fsops.js';
import {
  ToolboxError,
  ToolboxUnavailable,
  type Toolbox,
} from '../../src/server/toolbox/toolbox.js';
import type { FrameHeader } from '../../src/server/toolbox/frames.js';

type Reply = { header: FrameHeader; payload?: Buffer } | Error;

/** A toolbox that records requests and answers from `script` (by op). */
function scripted(script: Record<string, (h: FrameHeader) => Reply>) {
  const requests: [string, FrameHeader][] = [];
  const toolbox = {
    home: '/home/user',
    request: (op: string, header: FrameHeader) => {
      requests.push([op, header]);
      const r = script[op]?.(header) ?? new Error(`unscripted ${op}`);
      if (r instanceof Error) return Promise.reject(r);
      return Promise.resolve({
        header: r.header,
        payload: r.payload ?? Buffer.alloc(0),
        generation: 1,
      });
    },
  } as unknown as Toolbox;
  return { files: new InstanceFiles(toolbox, ['/home/user', '/tmp']), requests };
}

async function failure(p: Promise<unknown>): Promise<ToolFailure | Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('did not fail');
}

describe('InstanceFiles', () => {
  it('sends the path as requested and shows it made absolute', async () => {
    const { files, requests } = scripted({
      stat: () => ({ header: { path: '/home/user/real', type: 'file', size: 3, mode: 0o644 } }),
    });
    const st = await files.stat('docs/../notes.txt');
    expect(requests[0]).toEqual(['stat', { path: 'docs/../notes.txt', follow: true }]);
    expect(st).toMatchObject({ path: '/home/user/real', display: '/home/user/notes.txt' });
    expect(files.display('a/./b')).toBe('/home/user/a/b');
    expect(files.target({ path: 'x', display: '/shown' })).toEqual({
      path: 'x',
      display: '/shown',
    });
  });

  it('names the requested path in every refusal, not the one the toolbox resolved', async () => {
    const cases: [ToolboxError, string][] = [
      [
        new ToolboxError('HIDDEN', 'hidden', 'path', {}),
        'Access denied: /home/user/link is outside what this instance can access',
      ],
      [
        new ToolboxError('EROFS', 'Read-only file system', 'path'),
        'Access denied: /home/user/link is read-only (writes are allowed only under /home/user and /tmp)',
      ],
      [new ToolboxError('EISDIR', 'Is a directory', 'path'), '/home/user/link is a directory'],
      [
        new ToolboxError('NOT_REGULAR', 'not regular', 'path'),
        '/home/user/link is not a regular file',
      ],
      [
        new ToolboxError('TOO_LARGE', 'too large', 'path', { size: 99, max: 10 }),
        '/home/user/link is 99 bytes; this tool reads files of at most 10 bytes',
      ],
      [
        new ToolboxError('OWN_DIR', 'own', 'path'),
        "Refusing to remove /home/user/link: it is one of the instance's own directories",
      ],
      [
        new ToolboxError('UNWALKABLE', 'x', 'path'),
        'Cannot copy /home/user/link: it contains paths this instance cannot access',
      ],
      [
        new ToolboxError('ENOSPC', 'No space left on device', 'path'),
        "No space left on device: /home/user/link (the instance's disk is full)",
      ],
      [
        new ToolboxError('EDQUOT', 'Disk quota exceeded', 'path'),
        "Disk quota exceeded: /home/user/link (the instance's disk is full)",
      ],
      [
        new ToolboxError('ENOENT', 'No such file or directory', 'path'),
        'No such file or directory: /home/user/link',
      ],
    ];
    for (const [err, message] of cases) {
      const { files } = scripted({ read: () => err });
      const got = await failure(files.readBytes('link', 10));
      expect(got, err.code).toBeInstanceOf(ToolFailure);
      expect(got.message, err.code).toBe(message);
      expect((got as ToolFailure).code).toBe(err.code);
      expect((got as ToolFailure).reason).toBe(err.message);
      expect(got.message).not.toContain('/etc');
    }
  });

  it('names the side of a move or copy that failed', async () => {
    const src = { path: 'a', display: '/home/user/a' };
    const dst = { path: '/etc/b', display: '/etc/b' };
    const { files } = scripted({
      rename: () => new ToolboxError('EROFS', 'Read-only file system', 'dst'),
      copy: () => new ToolboxError('ENOENT', 'No such file or directory', 'src'),
    });
    expect((await failure(files.move(src, dst))).message).toMatch(/^Access denied: \/etc\/b is/);
    expect((await failure(files.copy(src, dst))).message).toBe(
      'No such file or directory: /home/user/a',
    );
  });

  it('reports a toolbox that is down as unavailable, and passes other errors on', async () => {
    const down = scripted({ mkdir: () => new ToolboxUnavailable('it exited') });
    const err = await failure(down.files.mkdir('x'));
    expect(err).toBeInstanceOf(ToolFailure);
    expect((err as ToolFailure).code).toBe('UNAVAILABLE');
    expect(err.message).toBe("The instance's file operations are unavailable: it exited");
    const bug = new TypeError('a bug');
    const other = scripted({ mkdir: () => bug });
    expect(await failure(other.files.mkdir('x'))).toBe(bug);
  });

  it('reads text as strict UTF-8, at most MAX_TEXT_BYTES', async () => {
    const { files, requests } = scripted({
      read: (h) =>
        h.path === 'bad'
          ? { header: { path: '/home/user/bad' }, payload: Buffer.from([0x61, 0xff, 0x62]) }
          : { header: { path: '/home/user/ok' }, payload: Buffer.from('héllo') },
    });
    expect(await files.readText('ok')).toEqual({ path: '/home/user/ok', text: 'héllo' });
    expect(requests[0]![1]).toMatchObject({ max: MAX_TEXT_BYTES });
    const err = await failure(files.readText('bad'));
    expect(err).toBeInstanceOf(ToolFailure);
    expect(err.message).toBe('Ran into invalid UTF-8 data while trying to read /home/user/bad');
  });

  it('lists names sorted, directories with a slash', async () => {
    const { files } = scripted({
      list: () => ({
        header: {
          path: '/home/user',
          entries: [
            ['b', false],
            ['a', true],
            ['c', false],
          ],
        },
      }),
    });
    expect(await files.list('.')).toEqual({ names: ['a/', 'b', 'c'], total: 3 });
  });
});

describe("the editor tool's helpers", () => {
  it('numbers lines like cat -n', () => {
    expect(numbered('a\nb')).toBe('     1\ta\n     2\tb');
    expect(numbered('x', 10)).toBe('    10\tx');
  });

  it("counts like Python's str.count", () => {
    expect(countOccurrences('aaaa', 'aa')).toBe(2);
    expect(countOccurrences('abcabc', 'c')).toBe(2);
    expect(countOccurrences('abc', '')).toBe(4);
    expect(countOccurrences('abc', 'x')).toBe(0);
    expect(pyList([1, 2])).toBe('[1, 2]');
  });

  it('checks a view range against the file', () => {
    expect(checkViewRange([1, 3], 3)).toEqual([1, 3]);
    expect(checkViewRange([2, -1], 3)).toEqual([2, -1]);
    expect(checkViewRange([3, 3], 3)).toEqual([3, 3]);
    expect(() => checkViewRange([1], 3)).toThrow('should be a list of two integers');
    expect(() => checkViewRange([0, 2], 3)).toThrow('Its first element `0` should be within');
    expect(() => checkViewRange([4, 4], 3)).toThrow('Its first element `4` should be within');
    expect(() => checkViewRange([1, 4], 3)).toThrow('Its second element `4` should be smaller');
    expect(() => checkViewRange([3, 2], 3)).toThrow('should be larger or equal than its first `3`');
  });
});
