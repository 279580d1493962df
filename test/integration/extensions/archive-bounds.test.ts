/**
 * Extension archives bounded in depth and name length at upload (issue 35), from a client with
 * the API key: an entry 2,000 levels deep, a component longer than 255 bytes, or a path longer
 * than 1,024 bytes is refused with a 422 naming the problem, and nothing is stored. A stored
 * extension whose files cannot be copied into an instance (one kept before the bound, made here
 * by hand) fails its start with a 409 naming the cause, without a host path, and leaves nothing.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';
import { makeZip, testExtension, type ZipInput } from '../../helpers/zip.js';

const dataDir = mkdtempSync(join(tmpdir(), 'burrow-ext-bounds-'));
let server: TestServer;
beforeAll(async () => {
  server = await testServer({ dataDir });
});
afterAll(async () => {
  await server?.close();
  execFileSync('rm', ['-rf', dataDir]); // GNU rm: Node's own recursion is too deep for the tree
  expect(instanceProcesses()).toEqual([]);
});

function upload(zip: Buffer): Promise<Response> {
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(zip)], { type: 'application/zip' }), 'ext.zip');
  return server.api('/v1/extensions', { method: 'POST', body: form });
}

/** What the server keeps of extensions: its listing and its directory. */
async function stored(): Promise<{ listed: unknown; files: string[] }> {
  const res = await server.api('/v1/extensions');
  expect(res.status).toBe(200);
  return { listed: await res.json(), files: readdirSync(join(dataDir, 'extensions')) };
}

const component = (n: number) => 'p'.repeat(n);

describe('extension archives bounded at upload', () => {
  const cases: [string, ZipInput, RegExp][] = [
    ['2,000 levels deep', { name: `${'a/'.repeat(2000)}x.js`, data: 'x' }, /2001 levels deep/],
    [
      'a component of 300 bytes',
      { name: `${component(300)}.js`, data: 'x' },
      /name longer than 255 bytes/,
    ],
    [
      'a component of 130 two-byte characters',
      { name: `dir/${'é'.repeat(130)}`, data: 'x' },
      /name longer than 255 bytes/,
    ],
    [
      'a path of 1,800 bytes',
      { name: `${Array.from({ length: 9 }, () => component(200)).join('/')}/x.js`, data: 'x' },
      /path longer than 1024 bytes/,
    ],
  ];
  it.each(cases)('refuses an entry %s with a 422, keeping nothing', async (_what, entry, why) => {
    const before = await stored();
    const res = await upload(makeZip([...testExtension(), entry]));
    expect(res.status).toBe(422);
    const body = JSON.stringify(await res.json());
    expect(body).toMatch(why);
    expect(body.length).toBeLessThan(2_000); // the name is quoted by its start only
    expect(body).not.toContain(dataDir);
    expect(await stored()).toEqual(before);
  });

  it('still takes an archive within the bounds', async () => {
    const entry = { name: `${'d/'.repeat(60)}${component(200)}`, data: 'x' };
    const res = await upload(makeZip([...testExtension(), entry]));
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    expect(await server.api(`/v1/extensions/${id}`, { method: 'DELETE' })).toHaveProperty(
      'status',
      200,
    );
  });
});

describe('a stored extension that cannot be copied into an instance', () => {
  it('fails the start with a 409 naming the cause, no host path, and leaves nothing', async () => {
    const res = await upload(makeZip(testExtension()));
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    // as an archive stored before the bound would be: 2,000 levels under its files
    const files = join(dataDir, 'extensions', id, 'files');
    execFileSync('python3', [
      '-c',
      'import os, sys\nos.chdir(sys.argv[1])\nfor _ in range(2000):\n  os.mkdir("a"); os.chdir("a")\nopen("x.js", "w").close()',
      files,
    ]);

    const start = await server.api('/v1/start', {
      json: { instance_type: 'browser', extensions: [id] },
    });
    const text = await start.text();
    expect(start.status).toBe(409);
    const { detail } = JSON.parse(text) as { detail: string };
    expect(detail).toContain(id);
    expect(detail).toMatch(/cannot be copied into the instance \(ENAMETOOLONG/);
    expect(text).not.toContain(dataDir);
    expect(text).not.toMatch(/'\/|"\//); // no quoted absolute path of any kind
    const listed = await server.api('/v1/instances');
    expect(await listed.json()).toEqual([]);
  }, 120_000);
});
