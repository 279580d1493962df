/**
 * `upload` on browser instances, over plain HTTP: the file lands in the instance's home, written
 * inside its sandbox, and a raw CDP client (no Playwright, no bridge) sets it on a file input with
 * `DOM.setFileInputFiles` using the path the answer names; the page reads the same bytes back.
 * Paths that would leave what the instance may write are refused with a 4xx and write nothing.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { instanceDisk, instanceProcesses } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

/** A directory of the host outside anything the sandbox shows (its /tmp is the instance's own). */
const hostDir = mkdtempSync(join(homedir(), '.burrow-upload-host-'));

afterAll(() => {
  rmSync(hostDir, { recursive: true, force: true });
  expect(instanceProcesses()).toEqual([]);
});
const server = useServer();
const instance = useInstance(server, 'browser');

async function upload(path: string, data: Buffer, filename = 'file.bin') {
  const form = new FormData();
  form.set('path', path);
  form.set('file', new Blob([new Uint8Array(data)]), filename);
  return server.api(`/v1/instance/${instance.id}/upload`, { method: 'POST', body: form });
}

/** A minimal CDP client on the browser endpoint, with one flattened page session. */
class RawCdp {
  #next = 1;
  readonly #pending = new Map<number, (msg: Record<string, unknown>) => void>();
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as Record<string, unknown>;
      if (typeof msg.id === 'number') this.#pending.get(msg.id)?.(msg);
    });
  }
  static async open(url: string): Promise<RawCdp> {
    const ws = new WebSocket(url, { maxPayload: 256 * 1024 * 1024 });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return new RawCdp(ws);
  }
  send<T>(method: string, params: object = {}, sessionId?: string): Promise<T> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, (msg) => {
        this.#pending.delete(id);
        if (msg.error) reject(new Error(`${method}: ${JSON.stringify(msg.error)}`));
        else resolve(msg.result as T);
      });
      this.ws.send(JSON.stringify({ id, method, params, ...(sessionId && { sessionId }) }));
    });
  }
  close(): void {
    this.ws.close();
  }
}

const INPUT_PAGE = 'data:text/html,<input type=file id=f multiple>';

/** FNV-1a over the bytes: the same function runs in the page (READ_BACK) and here. */
const FNV = `(bytes) => {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193) >>> 0;
  return h;
}`;
const fnv = new Function(`return ${FNV}`)() as (bytes: Uint8Array) => number;

/**
 * The files of `#f` as `[{name, size, hash}]`, from what FileReader read in the page (a data: URL
 * is not a secure context, so no crypto.subtle there).
 */
const READ_BACK = `(async () => {
  const fnv = ${FNV};
  const out = [];
  for (const file of document.getElementById('f').files) {
    const buf = await new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(r.result);
      r.onerror = () => reject(r.error);
      r.readAsArrayBuffer(file);
    });
    out.push({ name: file.name, size: buf.byteLength, hash: fnv(new Uint8Array(buf)) });
  }
  return JSON.stringify(out);
})()`;

describe('upload on a browser instance', () => {
  it('puts the file in the home; a raw CDP client sets it on an input and the page reads it', async () => {
    const small = Buffer.from('hello from the test, ünïcødé\n');
    const big = randomBytes(3 * 1024 * 1024 + 17);
    const r1 = await upload('inputs/', small, 'hello.txt');
    expect(r1.status).toBe(200);
    const a = (await r1.json()) as { filename: string; path: string };
    expect(a.filename).toBe('hello.txt');
    expect(a.path).toMatch(/\/inputs\/hello\.txt$/);
    const r2 = await upload('inputs/big.bin', big, 'ignored-name.bin');
    expect(r2.status).toBe(200);
    const b = (await r2.json()) as { filename: string; path: string };
    expect(b.path).toMatch(/\/inputs\/big\.bin$/);

    const home = instanceDisk(instance.id).home;

    const cdp = await RawCdp.open(instance.cdpUrl);
    try {
      const { targetInfos } = await cdp.send<{ targetInfos: { type: string; targetId: string }[] }>(
        'Target.getTargets',
      );
      const target = targetInfos.find((t) => t.type === 'page')!;
      const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', {
        targetId: target.targetId,
        flatten: true,
      });
      await cdp.send('Page.enable', {}, sessionId);
      await cdp.send('Page.navigate', { url: INPUT_PAGE }, sessionId);
      let objectId: string | undefined;
      for (let i = 0; i < 100 && !objectId; i++) {
        const { result } = await cdp.send<{ result: { objectId?: string } }>(
          'Runtime.evaluate',
          { expression: "document.getElementById('f')" },
          sessionId,
        );
        objectId = result.objectId;
        if (!objectId) await new Promise((r) => setTimeout(r, 50));
      }
      expect(objectId).toBeDefined();
      await cdp.send('DOM.setFileInputFiles', { objectId, files: [a.path, b.path] }, sessionId);
      const { result } = await cdp.send<{ result: { value?: unknown } }>(
        'Runtime.evaluate',
        { expression: READ_BACK, awaitPromise: true, returnByValue: true },
        sessionId,
      );
      expect(JSON.parse(result.value as string)).toEqual([
        { name: 'hello.txt', size: small.length, hash: fnv(small) },
        { name: 'big.bin', size: big.length, hash: fnv(big) },
      ]);
    } finally {
      cdp.close();
    }
    // on the instance's own disk, owned by its user
    const st = statSync(join(home, 'inputs', 'big.bin'));
    expect(st.size).toBe(big.length);
    expect(st.uid).toBe(statSync(home).uid);
  });

  it('refuses paths outside what the instance may write, with a 4xx, writing nothing', async () => {
    const marker = `burrow-escape-${randomBytes(6).toString('hex')}`;
    // links the instance could have made: to a directory of the host, and to /etc
    symlinkSync(hostDir, join(instanceDisk(instance.id).home, 'to-host'));
    symlinkSync('/etc', join(instanceDisk(instance.id).home, 'to-etc'));
    for (const path of [
      `../../../../../../etc/${marker}`,
      `/etc/${marker}`,
      `to-etc/${marker}`,
      `to-host/${marker}`,
      `to-host/`,
      `${hostDir}/${marker}`,
      `/proc/self/${marker}`,
      `/usr/lib/${marker}`,
    ]) {
      const res = await upload(path, Buffer.from('x'));
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.status, path).toBeLessThan(500);
      expect(((await res.json()) as { detail: unknown }).detail, path).toEqual(expect.any(String));
    }
    expect(existsSync(`/etc/${marker}`)).toBe(false);
    expect(existsSync(`/usr/lib/${marker}`)).toBe(false);
    expect(readdirSync(hostDir)).toEqual([]);
  });

  it('a missing path is the 422 of the API', async () => {
    const form = new FormData();
    form.set('file', new Blob([Buffer.from('x')]), 'x.txt');
    const res = await server.api(`/v1/instance/${instance.id}/upload`, {
      method: 'POST',
      body: form,
    });
    expect(res.status).toBe(422);
  });
});
