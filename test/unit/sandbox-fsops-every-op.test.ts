/**
 * Every file operation of the tools' layer over the toolbox (src/server/toolbox/fsops.ts), not
 * only reads: a refusal of any of them (stat, write, mkdir, remove, list, tree, an upload's open,
 * chunks and commit) names the path as the client wrote it, never an empty one or the path the
 * toolbox resolved to; the options a client gave reach the toolbox; an upload is written,
 * committed and aborted through the toolbox; text files of several MiB are read whole and the
 * read bounds fit in one toolbox frame. Also the full text of the editor's view-range refusal.
 */
import { describe, expect, it } from 'vitest';
import { ToolFailure } from '../../src/server/computer/failure.js';
import {
  checkViewRange,
  InstanceFiles,
  MAX_READ_BYTES,
  MAX_TEXT_BYTES,
} from '../../src/server/toolbox/fsops.js';
import { MAX_PAYLOAD_BYTES, type FrameHeader } from '../../src/server/toolbox/frames.js';
import { MAX_LIST_ENTRIES } from '../../src/server/toolbox/files.js';
import { ToolboxError, type Toolbox } from '../../src/server/toolbox/toolbox.js';

type Reply = { header: FrameHeader; payload?: Buffer } | Error;

/** A toolbox that records requests (op, header, payload) and answers from `script` (by op). */
function scripted(script: Record<string, (h: FrameHeader) => Reply>) {
  const requests: { op: string; header: FrameHeader; payload?: Uint8Array | undefined }[] = [];
  const toolbox = {
    home: '/home/user',
    request: (op: string, header: FrameHeader, opts: { payload?: Uint8Array } = {}) => {
      requests.push({ op, header, payload: opts.payload });
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

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('did not fail');
}

const denied = () => new ToolboxError('EACCES', 'Permission denied', 'path');

describe('a refused operation names the path the client wrote', () => {
  const asked = 'notes/../secret/file';
  const shown = '/home/user/secret/file';

  it.each<[string, string, (f: InstanceFiles) => Promise<unknown>]>([
    ['stat', 'stat', (f) => f.stat(asked)],
    ['stat without following the link', 'stat', (f) => f.stat(asked, false)],
    ['readBytes', 'read', (f) => f.readBytes(asked, 10)],
    ['readText', 'read', (f) => f.readText(asked)],
    ['write', 'write', (f) => f.write(asked, 'x')],
    ['mkdir', 'mkdir', (f) => f.mkdir(asked)],
    ['remove', 'remove', (f) => f.remove(asked)],
    ['list', 'list', (f) => f.list(asked)],
    ['tree', 'tree', (f) => f.tree(asked, 2)],
    ['openUpload', 'open', (f) => f.openUpload(asked)],
  ])('%s', async (_name, op, call) => {
    const { files, requests } = scripted({ [op]: denied });
    const err = await failure(call(files));
    expect(err).toBeInstanceOf(ToolFailure);
    expect(err.message).toBe(`Permission denied: ${shown}`);
    expect(String(err)).toBe(`ToolFailure: Permission denied: ${shown}`);
    expect(requests.map((r) => [r.op, r.header.path])).toEqual([[op, asked]]);
  });

  it("an upload's chunks and commit name it too; a full disk says so", async () => {
    let chunkReply: () => Reply = () => ({ header: {} });
    const { files, requests } = scripted({
      open: () => ({ header: { handle: 7, path: '/home/user/real/file', tmp: '/home/user/.t' } }),
      chunk: () => chunkReply(),
      commit: denied,
    });
    const upload = await files.openUpload(asked);
    expect(upload).toMatchObject({ path: '/home/user/real/file', display: shown });
    await upload.write(Buffer.from('abc'));
    chunkReply = () => new ToolboxError('ENOSPC', 'No space left on device', 'path');
    expect((await failure(upload.write(Buffer.from('def')))).message).toBe(
      `No space left on device: ${shown} (the instance's disk is full)`,
    );
    expect((await failure(upload.commit())).message).toBe(`Permission denied: ${shown}`);
    expect(requests.map((r) => [r.op, r.header.handle, r.payload?.toString()])).toEqual([
      ['open', undefined, undefined],
      ['chunk', 7, 'abc'],
      ['chunk', 7, 'def'],
      ['commit', 7, undefined],
    ]);
  });
});

describe('what reaches the toolbox', () => {
  it('writes carry the data and the append / exclusive choice; the result is the real path', async () => {
    const { files, requests } = scripted({
      write: (h) => ({ header: { path: '/home/user/real', appended: h.append } }),
    });
    expect(await files.write('a', 'héllo')).toEqual({ path: '/home/user/real', appended: false });
    expect(await files.write('a', Buffer.from('x'), { append: true })).toEqual({
      path: '/home/user/real',
      appended: true,
    });
    await files.write('a', 'y', { exclusive: true });
    expect(requests.map((r) => [r.header, r.payload?.toString()])).toEqual([
      [{ path: 'a', append: false, exclusive: false }, 'héllo'],
      [{ path: 'a', append: true, exclusive: false }, 'x'],
      [{ path: 'a', append: false, exclusive: true }, 'y'],
    ]);
  });

  it('a directory is removed only as asked, and the removed path is the real one', async () => {
    const { files, requests } = scripted({ remove: () => ({ header: { path: '/home/user/d' } }) });
    expect(await files.remove('d')).toBe('/home/user/d');
    expect(await files.remove('d', { recursive: true })).toBe('/home/user/d');
    await files.remove('d', { dirOnly: true });
    expect(requests.map((r) => r.header)).toEqual([
      { path: 'd', recursive: false, dir_only: false },
      { path: 'd', recursive: true, dir_only: false },
      { path: 'd', recursive: false, dir_only: true },
    ]);
  });

  it('mkdir and tree answer what the toolbox found, at the depth asked', async () => {
    const { files, requests } = scripted({
      mkdir: () => ({ header: { path: '/home/user/new' } }),
      tree: () => ({ header: { path: '/home/user', entries: ['a', 'a/b'], total: 5 } }),
    });
    expect(await files.mkdir('new')).toBe('/home/user/new');
    // the toolbox cut the listing: the tools are told how many it has in all
    expect(await files.tree('.', 3)).toEqual({ entries: ['a', 'a/b'], total: 5 });
    expect(requests.map((r) => r.header)).toEqual([
      { path: 'new' },
      { path: '.', depth: 3, limit: MAX_LIST_ENTRIES },
    ]);
  });

  it('an aborted upload removes its temp file through the toolbox, once', async () => {
    const { files, requests } = scripted({
      open: () => ({ header: { handle: 'h', path: '/home/user/f', tmp: '/home/user/.f.tmp' } }),
      abort: () => ({ header: {} }),
    });
    const upload = await files.openUpload('f');
    await upload.abort();
    await upload.abort();
    expect(requests.map((r) => [r.op, r.header])).toEqual([
      ['open', { path: 'f' }],
      ['abort', { handle: 'h' }],
    ]);
  });
});

describe('how much is read', () => {
  it('a text file of several MiB (a minified bundle) is read whole', async () => {
    const text = 'x'.repeat(4 * 1024 * 1024);
    // the toolbox refuses a file larger than the bound it is sent
    const { files } = scripted({
      read: (h) =>
        Buffer.byteLength(text) > (h.max as number)
          ? new ToolboxError('TOO_LARGE', 'too large', 'path', { size: text.length, max: h.max })
          : { header: { path: '/home/user/bundle.js' }, payload: Buffer.from(text) },
    });
    expect((await files.readText('bundle.js')).text).toHaveLength(text.length);
  });

  it('the read bounds fit in one toolbox frame, the text bound within the read bound', () => {
    expect(MAX_TEXT_BYTES).toBeLessThanOrEqual(MAX_READ_BYTES);
    expect(MAX_READ_BYTES).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
  });
});

describe("the editor's view range", () => {
  it('a first line outside the file names the range of lines', () => {
    expect(() => checkViewRange([5, 6], 3)).toThrow(
      'Invalid `view_range`: [5, 6]. Its first element `5` should be within the range of lines of the file: [1, 3]',
    );
  });
});
