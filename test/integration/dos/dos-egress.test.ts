/**
 * Request smuggling through the egress, from inside a real ubuntu instance: its shell writes raw
 * bytes to the proxy at 127.0.0.1:3128 (in its own network namespace) aimed at an HTTP server on
 * the host's loopback (which the test server allows). A chunked GET whose body is a second
 * request naming a blocked host must reach the upstream as exactly one request, and the blocked
 * Host must never get through, pipelined or smuggled.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useInstance, useServer } from '../../helpers/use-server.js';

let port = 0;
/** Every request the upstream parsed: method, path, Host, body. */
const seen: { method: string; url: string; host: string; body: string }[] = [];
const upstream = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d: Buffer) => (body += d.toString('latin1')));
  req.on('end', () => {
    seen.push({ method: req.method!, url: req.url!, host: req.headers.host ?? '', body });
    res.end('upstream-ok');
  });
});

/** What the upstream was sent after agreeing to switch to h2c (it answers 101 to any upgrade). */
let afterSwitch = '';
const switched: Socket[] = [];
upstream.on('upgrade', (_req, socket: Socket) => {
  switched.push(socket);
  socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n');
  socket.on('data', (d: Buffer) => (afterSwitch += d.toString('latin1')));
  socket.on('error', () => {});
});

beforeAll(async () => {
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  port = (upstream.address() as AddressInfo).port;
}, 180_000);

afterAll(async () => {
  for (const socket of switched) socket.destroy();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});
const server = useServer({}, { timeout: 180_000 });
const instance = useInstance(server, 'ubuntu', { blocked_domains: ['blocked.test'] }, 180_000);

/** Sends `payload` (a Python bytes literal) to the instance's proxy; prints what came back. */
async function sendFromInside(payload: string): Promise<string> {
  const py = `
import socket, time
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(${payload})
s.settimeout(2)
out = b""
end = time.time() + 3
while time.time() < end:
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    if not d:
        break
    out += d
print(out.decode("latin-1"))
`;
  const res = await server.api(`/v1/instance/${instance.id}/bash`, {
    json: { command: `python3 - <<'PY'\n${py}\nPY`, timeout: 30 },
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { output?: string; error?: string };
  return `${body.output ?? ''}${body.error ?? ''}`;
}

describe('the egress from inside an instance', () => {
  it('forwards a chunked GET as one request: the smuggled one never reaches the upstream', async () => {
    seen.length = 0;
    const smuggled = 'GET /smuggled HTTP/1.1\\r\\nHost: blocked.test\\r\\n\\r\\n';
    const payload =
      `b"GET http://127.0.0.1:${port}/first HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n` +
      `Transfer-Encoding: chunked\\r\\n\\r\\n" + ` +
      `("%x\\r\\n" % len(b"${smuggled}")).encode() + b"${smuggled}\\r\\n0\\r\\n\\r\\n"`;
    const answer = await sendFromInside(payload);
    expect(answer).toContain('upstream-ok');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/first', host: `127.0.0.1:${port}` });
    expect(seen.some((r) => r.host === 'blocked.test' || r.url === '/smuggled')).toBe(false);
  }, 60_000);

  it('a Content-Length and Transfer-Encoding together are refused before the upstream', async () => {
    seen.length = 0;
    const answer = await sendFromInside(
      `b"POST http://127.0.0.1:${port}/x HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n` +
        `Content-Length: 6\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET /smuggled HTTP/1.1\\r\\nHost: blocked.test\\r\\n\\r\\n"`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(seen).toEqual([]);
  }, 60_000);

  it('a pipelined request for a blocked Host is refused on its own', async () => {
    seen.length = 0;
    const answer = await sendFromInside(
      `b"GET http://127.0.0.1:${port}/a HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n\\r\\n` +
        `GET http://127.0.0.1:${port}/b HTTP/1.1\\r\\nHost: blocked.test\\r\\n\\r\\n"`,
    );
    expect(answer).toContain('upstream-ok');
    expect(answer).toContain('blocked_domain');
    expect(seen.map((r) => r.url)).toEqual(['/a']);
  }, 60_000);

  it('a path a URL parser reads as another host names that host, proxied or tunnelled', async () => {
    seen.length = 0;
    // an upstream routing by new URL(path, 'http://' + Host) would serve blocked.test
    for (const path of [
      '//blocked.test/x',
      '/\\\\blocked.test/x',
      '///blocked.test/x',
      '////blocked.test/x',
      '/\\\\/blocked.test/x',
      // a server that decodes the path's escapes first, or reads a URL in it (attack5's R3)
      '/%2f%2fblocked.test/x',
      '/http://blocked.test/x',
    ]) {
      const proxied = await sendFromInside(
        `b"GET http://127.0.0.1:${port}${path} HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n\\r\\n"`,
      );
      expect(proxied, path).toContain('blocked_domain');
      const tunnelled = await sendFromInside(
        `b"CONNECT 127.0.0.1:${port} HTTP/1.1\\r\\n\\r\\nGET ${path} HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n\\r\\n"`,
      );
      expect(tunnelled, path).toContain('blocked_domain');
    }
    // HTTP/2 in the clear names its hosts in binary frames: the tunnel refuses it
    const h2c = await sendFromInside(
      `b"CONNECT 127.0.0.1:${port} HTTP/1.1\\r\\n\\r\\nPRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n"`,
    );
    expect(h2c).toContain('HTTP/2 in the clear');
    // and so does a proxied request's switch to it (`Upgrade: h2c`), once the upstream agreed
    afterSwitch = '';
    const upgraded = await sendFromInside(
      `b"GET http://127.0.0.1:${port}/ HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n` +
        `Connection: Upgrade, HTTP2-Settings\\r\\nUpgrade: h2c\\r\\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\\r\\n\\r\\n` +
        `PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n"`,
    );
    expect(upgraded).toContain('HTTP/2 in the clear');
    expect(afterSwitch).toBe('');
    expect(seen).toEqual([]);
    // another host there is not blocked: it goes on, as the upstream's own business
    const other = await sendFromInside(
      `b"GET http://127.0.0.1:${port}//allowed.test/x HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n\\r\\n"`,
    );
    expect(other).toContain('upstream-ok');
    expect(seen.map((r) => r.url)).toEqual(['//allowed.test/x']);
  }, 60_000);

  it('a forwarding header naming a blocked host is refused, proxied or tunnelled', async () => {
    seen.length = 0;
    // an upstream that trusts X-Forwarded-Host or Forwarded would serve blocked.test
    for (const field of [
      'X-Forwarded-Host: ok.test, blocked.test',
      'Forwarded: host=blocked.test',
      // the rest of the family a rewriting front may read (attack5's R3)
      'X-Forwarded-Server: blocked.test',
      'X-HTTP-Host-Override: blocked.test',
      'X-Original-URL: http://blocked.test/',
      'X-Rewrite-URL: //blocked.test/',
    ]) {
      const head = `/x HTTP/1.1\\r\\nHost: 127.0.0.1:${port}\\r\\n${field}\\r\\n\\r\\n`;
      const proxied = await sendFromInside(`b"GET http://127.0.0.1:${port}${head}"`);
      expect(proxied, field).toContain('blocked_domain');
      const tunnelled = await sendFromInside(
        `b"CONNECT 127.0.0.1:${port} HTTP/1.1\\r\\n\\r\\nGET ${head}"`,
      );
      expect(tunnelled, field).toContain('blocked_domain');
    }
    expect(seen).toEqual([]);
  }, 60_000);
});
