/**
 * The root server never connects by a path an instance controls (ISOLATION.md, "The boundary"):
 * from the instance's shell, an attacker swaps x11vnc's socket or the X socket in its /tmp for a
 * link to a Unix socket of the host (one this test listens on), or deletes the X socket, and then
 * the live view and screenshots are asked for. The host socket gets no connection, the display's
 * cookie never leaves the instance, and the host's own X socket is never a fallback.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handshakeStatus } from '../../helpers/handshake.js';
import { testServer, type TestServer } from '../../helpers/server.js';

let server: TestServer;
const logs: string[] = [];

/** A Unix socket on the host that records whoever connects and what they send. */
class HostSocket {
  readonly connections: Buffer[][] = [];
  readonly #server: Server;
  readonly #open = new Set<Socket>();

  private constructor(
    readonly path: string,
    server: Server,
  ) {
    this.#server = server;
  }

  static async listen(path: string): Promise<HostSocket> {
    const server = createServer();
    const trap = new HostSocket(path, server);
    server.on('connection', (c) => {
      const got: Buffer[] = [];
      trap.connections.push(got);
      trap.#open.add(c);
      c.on('data', (d: Buffer) => got.push(d));
      c.on('error', () => {});
      c.write('RFB 003.008\n'); // what a VNC server says first (an X server waits)
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, resolve);
    });
    return trap;
  }

  received(): Buffer {
    return Buffer.concat(this.connections.flat());
  }

  async close(): Promise<void> {
    for (const c of this.#open) c.destroy();
    await new Promise((r) => this.#server.close(r));
    rmSync(this.path, { force: true });
  }
}

const api = async (path: string, json?: unknown) => {
  const res = await server.api(path, json === undefined ? { method: 'POST' } : { json });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

async function start(): Promise<string> {
  const r = await api('/v1/start', { instance_type: 'ubuntu', resolution: [800, 600] });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.id as string;
}

/** Runs `command` in the instance's shell: its output and error text. */
async function sh(id: string, command: string): Promise<string> {
  const r = await api(`/v1/instance/${id}/bash`, { command, timeout: 30 });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return `${(r.body.output as string | undefined) ?? ''}${(r.body.error as string | undefined) ?? ''}`;
}

/** The instance's display number and the cookie of its X authority (as its processes see them). */
async function display(id: string): Promise<{ number: string; cookie: Buffer }> {
  const out = await sh(id, 'echo "$DISPLAY"; od -An -v -tx1 "$XAUTHORITY" | tr -d " \\n"');
  const [name, hex] = out.trim().split('\n') as [string, string];
  const number = /^:(\d+)$/.exec(name.trim())![1]!;
  // one entry: the cookie is its last 16 bytes
  return { number, cookie: Buffer.from(hex.trim(), 'hex').subarray(-16) };
}

const logged = (pattern: RegExp) => logs.some((l) => pattern.test(l));

let vncId: string;
let linkId: string;
let goneId: string;
const traps: HostSocket[] = [];

beforeAll(async () => {
  server = await testServer({ logDestination: { write: (line) => void logs.push(line) } });
  [vncId, linkId, goneId] = await Promise.all([start(), start(), start()]);
});

afterAll(async () => {
  await server?.close();
  for (const t of traps) await t.close();
});

describe('an ubuntu instance pointing the server at host sockets', () => {
  it('live view: x11vnc socket swapped for a link to a host socket; the host socket gets nothing', async () => {
    const trap = await HostSocket.listen(`/tmp/burrow-trap-${randomBytes(4).toString('hex')}.sock`);
    traps.push(trap);
    const res = await server.api(`/v1/instance/${vncId}/stream_url`);
    expect(res.status).toBe(200);
    const url = new URL(((await res.json()) as { stream_url: string }).stream_url);
    const ws = `ws://${url.host}/stream/${vncId}/websockify?token=${url.searchParams.get('token')}`;
    expect(await handshakeStatus(ws, { protocols: ['binary'] })).toBe(101); // x11vnc answers before the attack

    const out = await sh(
      vncId,
      `cd /tmp && for s in .burrow-vnc-*.sock; do rm -f "$s" && ln -s ${trap.path} "$s"; done; ls -l .burrow-vnc-*.sock`,
    );
    expect(out).toContain(`-> ${trap.path}`);
    expect(await handshakeStatus(ws, { protocols: ['binary'] })).toBe(502);
    await sleep(300);
    expect(trap.connections).toEqual([]);
    expect(
      logged(/cannot connect to \/tmp\/\.burrow-vnc-\w+\.sock inside the instance: .*ENOENT/),
    ).toBe(true);
  });

  it('screenshot: X socket swapped for a link to a host socket; the host socket gets nothing, the cookie stays', async () => {
    const trap = await HostSocket.listen(`/tmp/burrow-trap-${randomBytes(4).toString('hex')}.sock`);
    traps.push(trap);
    const { number, cookie } = await display(linkId);
    const x = `/tmp/.X11-unix/X${number}`;
    const out = await sh(linkId, `rm -f ${x} && ln -s ${trap.path} ${x} && ls -l ${x}`);
    expect(out).toContain(`-> ${trap.path}`);

    // the instance's own doing: a tool failure naming the cause (issue 35), not a 500
    const r = await api(`/v1/instance/${linkId}/computer`, { action: 'take_screenshot' });
    expect(r.status).toBe(200);
    await sleep(300);
    expect(trap.received().includes(cookie)).toBe(false);
    expect(trap.connections).toEqual([]);
    expect(r.body.base64_image).toBeUndefined();
    expect(r.body.error).toMatch(
      new RegExp(`cannot connect to ${x} inside the instance: .*ENOENT`),
    );
  });

  it("screenshot: X socket deleted; a clear error, never the host's X socket", async (ctx) => {
    const { number, cookie } = await display(goneId);
    const x = `/tmp/.X11-unix/X${number}`;
    expect((await sh(goneId, `rm ${x} && ls /tmp/.X11-unix/ | wc -l`)).trim()).toBe('0');

    // the host's X socket of the same number: a trap, unless a real X server of the host's is
    // there (left alone); the lock keeps a host Xvfb starting meanwhile from taking the number
    const lock = `/tmp/.X${number}-lock`;
    const hostDirMade = !existsSync('/tmp/.X11-unix');
    if (existsSync(x) || existsSync(lock)) ctx.skip();
    writeFileSync(lock, `${String(process.pid).padStart(10)}\n`, { flag: 'wx' });
    let trap: HostSocket | undefined;
    try {
      mkdirSync('/tmp/.X11-unix', { recursive: true, mode: 0o1777 });
      trap = await HostSocket.listen(x);

      // the instance's own doing: a 409 naming the cause (issue 35), not a 500
      const r = await api(`/v1/instance/${goneId}/screenshot`);
      expect(r.status).toBe(409);
      const { detail } = r.body as { detail: string };
      await sleep(300);
      expect(trap.received().includes(cookie)).toBe(false);
      expect(trap.connections).toEqual([]);
      expect(detail).toMatch(
        new RegExp(
          `The X display :${number} cannot be reached: .*cannot connect to ${x} inside the instance: .*ENOENT`,
        ),
      );
    } finally {
      await trap?.close();
      rmSync(lock, { force: true });
      if (hostDirMade) rmdirSync('/tmp/.X11-unix');
    }
  });
});
