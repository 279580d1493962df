/**
 * An instance does not choose what the operator's `POST /screenshot` costs the server (attack5's
 * A1 and A7). Before, each of these answers took seconds of the server's main thread while
 * another client's `/livez` waited 3–5 s, and hundreds of MiB:
 *
 * - ubuntu: code inside moves the X socket aside, puts a fake X server there announcing a
 *   4096×4096 screen in a format that needs converting (32 bits, red and blue swapped), and ends
 *   the server's X connection so that the next screenshot reconnects to the fake. The screen is
 *   not the instance's resolution, so the screenshot is refused (409 naming both sizes) before a
 *   pixel is fetched; a fake at the instance's own size is converted in shared slices and answers
 *   a PNG of that size. (attack5's fake announced 7680×7680; on a loaded machine its 236 MB of
 *   pixels did not always come through the X relay within the GetImage deadline, so the old code
 *   failed those screenshots early. 4096×4096, 67 MB, comes through: before, each took ~1 s of
 *   main thread to convert.)
 * - browser: a `cdp_url` holder emulates a 3700×3700 viewport on the active tab and paints noise.
 *   The screenshot is clipped to the instance's resolution: a PNG of 1024×768.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { cdpClient } from '../../helpers/cdp-client.js';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { eventually } from '../../helpers/server.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const MiB = 1024 * 1024;
const SHOTS = 3;
const server = useServer({}, { timeout: 180_000 });
const ubuntu = useInstance(server, 'ubuntu', {}, 180_000);
const browser = useInstance(server, 'browser', {}, 180_000);

/**
 * A fake X server (attack5's fakex.py): `fakex.py X<n> W H` listens on the socket of display n
 * (named so, its command line does not name the socket's path), announces a W×H
 * screen, 32 bits a pixel with masks red 0xff, green 0xff00, blue 0xff0000, and answers every
 * GetImage with zeros of the size asked for. Ends after 90 s.
 */
const FAKE_X = `
import socket, sys, struct, threading, time
path, W, H = '/tmp/.X11-unix/' + sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8)
def setup_reply():
    vendor = b'fake'
    fmt = struct.pack('<BBB5x', 24, 32, 32)
    scr = struct.pack('<IIIIIHHHHHHIBBBB', 0x100, 0x20, 0xffffff, 0, 0, W, H, 300, 300, 1, 1, 0x21, 0, 0, 24, 1)
    depth = struct.pack('<BxH4x', 24, 1) + struct.pack('<IBBHIII4x', 0x21, 4, 8, 256, 0xff, 0xff00, 0xff0000)
    body = struct.pack('<IIIIHHBBBBBBBB4x', 1, 0x200000, 0x1fffff, 256, len(vendor), 65535, 1, 1, 0, 0, 32, 32, 8, 255) + vendor + fmt + scr + depth
    return struct.pack('<BxHHH', 1, 11, 0, len(body) // 4) + body
ZERO = bytes(8 * 1024 * 1024)
def serve(c):
    def rd(n):
        b = b''
        while len(b) < n:
            d = c.recv(n - len(b))
            if not d: raise EOFError
            b += d
        return b
    try:
        h = rd(12); an, dn = struct.unpack('<HH', h[6:10]); rd((an + 3) // 4 * 4 + (dn + 3) // 4 * 4)
        c.sendall(setup_reply()); seq = 0
        while True:
            r = rd(4); ln = struct.unpack('<H', r[2:4])[0] * 4; rest = rd(ln - 4) if ln > 4 else b''
            seq = (seq + 1) & 0xffff; op = r[0]
            if op == 73:
                w, hh = struct.unpack('<HH', rest[8:12]); n = w * 4 * hh
                c.sendall(struct.pack('<BBHII20x', 1, 24, seq, n // 4, 0x21)); mv = memoryview(ZERO)
                while n > 0: k = min(n, len(ZERO)); c.sendall(mv[:k]); n -= k
            elif op == 43 or op == 101:
                c.sendall(struct.pack('<BBHI24x', 1, 0, seq, 0))
    except Exception:
        pass
    finally:
        c.close()
end = time.time() + 90
s.settimeout(1)
while time.time() < end:
    try: c, _ = s.accept()
    except socket.timeout: continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

async function bash(command: string): Promise<string> {
  const res = await server.api(`/v1/instance/${ubuntu.id}/bash`, { json: { command } });
  expect(res.status).toBe(200);
  const out = (await res.json()) as { output?: string; error?: string };
  return out.output ?? '';
}

/** What the operator's client got: status, the PNG's size when there is one, the answer's length. */
function answer(status: number, text: string) {
  if (status !== 200) return { status, text, bytes: text.length };
  const { base64_image } = JSON.parse(text) as { base64_image: string };
  const head = Buffer.from(base64_image.slice(0, 44), 'base64');
  return { status, size: [head.readUInt32BE(16), head.readUInt32BE(20)], bytes: text.length };
}

/** The operator's screenshot, from the test's process (outside a measured window). */
async function screenshot(id: string) {
  const res = await server.api(`/v1/instance/${id}/screenshot`, { method: 'POST' });
  return answer(res.status, await res.text());
}

/**
 * The operator's client, a process of its own as it would be: the server runs in the test's
 * process, whose main thread would otherwise read and decode each answer, or fork curl, inside the
 * window. On each line URL of its stdin it takes SHOTS screenshots one after another, writes each
 * answer to DIR/i and prints their statuses as one JSON line.
 */
const OPERATOR = `
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
console.log('ready');
for await (const url of createInterface({ input: process.stdin })) {
  const statuses = [];
  for (let i = 0; i < Number(process.env.SHOTS); i++) {
    const res = await fetch(url, { method: 'POST', headers: { 'x-api-key': process.env.KEY } });
    writeFileSync(process.env.DIR + '/' + i, Buffer.from(await res.arrayBuffer()));
    statuses.push(res.status);
  }
  console.log(JSON.stringify(statuses));
}
`;

/** Screenshots one after another, by the operator's process, while another client probes `/livez`. */
async function shotsBeside(id: string) {
  const dir = await mkdtemp(join(tmpdir(), 'screenshot-size-'));
  const operator = spawn(process.execPath, ['--input-type=module', '-e', OPERATOR], {
    env: { ...process.env, SHOTS: String(SHOTS), DIR: dir, KEY: server.apiKey },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    const lines = createInterface({ input: operator.stdout })[Symbol.asyncIterator]();
    expect((await lines.next()).value).toBe('ready');
    const watch = await watchLivez(server.url);
    const rss0 = process.memoryUsage().rss;
    operator.stdin.write(`${server.url}/v1/instance/${id}/screenshot\n`);
    const shots = lines.next().then((line) => JSON.parse(String(line.value)) as number[]);
    const seen = await watch.until(shots);
    const all = [];
    for (const [i, status] of (await shots).entries()) {
      all.push(answer(status, await readFile(join(dir, String(i)), 'utf8')));
    }
    return { seen, shots: all, grew: seen.peakRss - rss0 };
  } finally {
    operator.kill();
    await rm(dir, { recursive: true, force: true });
  }
}

describe('what an instance makes the operator’s screenshot cost', () => {
  it(
    'ubuntu: a fake X server of 4096×4096 is refused, one of the instance’s size converted',
    { retry: 1, timeout: 120_000 },
    async () => {
      expect(await screenshot(ubuntu.id)).toMatchObject({ status: 200, size: [1024, 768] });
      const socket = /X\d+/.exec(await bash('ls /tmp/.X11-unix/'))?.[0];
      expect(socket).toBeDefined();
      const path = `/tmp/.X11-unix/${socket}`;
      const converted = () =>
        eventually(async () => {
          const shot = await screenshot(ubuntu.id);
          if (shot.status === 409) return false;
          expect(shot).toMatchObject({ status: 200, size: [1024, 768] });
          return true;
        }, 'a screenshot of the instance’s size');
      const stopFake = '[ -f /tmp/fakex.pid ] && kill $(cat /tmp/fakex.pid) 2>/dev/null';
      await bash(`cat > /tmp/fakex.py <<'EOF'\n${FAKE_X}\nEOF`);
      // the server's X connection goes through a relay that runs inside, as the instance's user:
      // ending it makes the next screenshot connect anew, to whatever is on the socket's path
      const fake = (w: number, h: number) =>
        bash(
          `${stopFake}; rm -f ${path}; (nohup python3 /tmp/fakex.py ${socket} ${w} ${h} >/tmp/fakex.log 2>&1 & echo $! >/tmp/fakex.pid); ` +
            `for i in $(seq 50); do [ -S ${path} ] && break; sleep 0.1; done; ` +
            `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q "X11-unix/${socket}" && kill \${p#/proc/}; done; true`,
        );
      await bash(`mv ${path} /tmp/real-${socket}`);
      await fake(4096, 4096);

      const { seen, shots, grew } = await shotsBeside(ubuntu.id);
      console.log('screenshot-size (fake X 4096×4096):', said(seen), {
        grewMiB: Math.round(grew / MiB),
        shots: shots.map((s) => [s.status, s.bytes]),
      });
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
      expect(grew).toBeLessThan(100 * MiB);
      for (const shot of shots) {
        expect(shot.status).toBe(409);
        expect(shot.text).toMatch(/screen of 4096×4096, not the instance's 1024×768/);
      }

      // a fake at the instance's own size, in the same format that needs converting
      await fake(1024, 768);
      await converted();

      // the real display back: screenshots as before
      await bash(
        `${stopFake}; rm -f ${path}; mv /tmp/real-${socket} ${path}; ` +
          `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q "X11-unix/${socket}" && kill \${p#/proc/}; done; true`,
      );
      await converted();
    },
  );

  it(
    'browser: a 3700×3700 viewport of noise set over cdp_url gives a 1024×768 screenshot',
    { retry: 1, timeout: 120_000 },
    async () => {
      const holder = await cdpClient(browser.cdpUrl);
      try {
        const { result } = (await holder.call('Target.getTargets')) as {
          result: { targetInfos: { type: string; targetId: string }[] };
        };
        const page = result.targetInfos.find((t) => t.type === 'page')!;
        const attached = (await holder.call('Target.attachToTarget', {
          targetId: page.targetId,
          flatten: true,
        })) as { result: { sessionId: string } };
        const session = attached.result.sessionId;
        const S = 3700;
        expect(
          await holder.call(
            'Emulation.setDeviceMetricsOverride',
            { width: S, height: S, deviceScaleFactor: 1, mobile: false },
            session,
          ),
        ).toHaveProperty('result');
        const painted = (await holder.call(
          'Runtime.evaluate',
          {
            awaitPromise: true,
            returnByValue: true,
            expression: `(async () => {
            document.body.style.margin = 0;
            const cv = document.createElement('canvas'); cv.width = ${S}; cv.height = ${S};
            document.body.appendChild(cv);
            const g = cv.getContext('2d'); const im = g.createImageData(${S}, ${S});
            const u = new Uint32Array(im.data.buffer);
            for (let i = 0; i < u.length; i++) u[i] = (Math.random() * 0xffffff) | 0xff000000;
            g.putImageData(im, 0, 0);
            return innerWidth + 'x' + innerHeight;
          })()`,
          },
          session,
        )) as { result?: { result?: { value?: string } } };
        expect(painted.result?.result?.value).toBe(`${S}x${S}`);

        const { seen, shots, grew } = await shotsBeside(browser.id);
        console.log('screenshot-size (browser 3700×3700 noise):', said(seen), {
          grewMiB: Math.round(grew / MiB),
          shots: shots.map((s) => [s.status, s.bytes]),
        });
        expect(seen.server.p99).toBeLessThan(livezBound(seen));
        expect(grew).toBeLessThan(100 * MiB);
        for (const shot of shots) {
          expect(shot).toMatchObject({ status: 200, size: [1024, 768] });
          // 1024×768 of noise: about 3 bytes a pixel, 4/3 of that in base64
          expect(shot.bytes).toBeLessThan(5 * MiB);
        }
      } finally {
        holder.ws.close();
      }
    },
  );
});
