/**
 * The `CONNECT host:port` front: tunnels for HTTPS, wss and anything else over TCP. The target is
 * admitted and connected before the client is answered 200; after that the tunnel's first flight
 * is held until its TLS ClientHello, if it is one, is known to name no blocked domain.
 */
import type http from 'node:http';
import type net from 'node:net';
import { parseAuthority } from '../proxy-http.js';
import { Refusal } from '../refusal.js';
import type { Front } from './front.js';

/** Serve one CONNECT request; whatever goes wrong is answered on the socket. */
export function serveConnect(
  front: Front,
  req: http.IncomingMessage,
  socket: net.Socket,
  head: Buffer,
): void {
  tunnel(front, req, socket, head).catch((err: unknown) => front.refuseRaw('connect', socket, err));
}

async function tunnel(
  front: Front,
  req: http.IncomingMessage,
  socket: net.Socket,
  head: Buffer,
): Promise<void> {
  const target = parseAuthority(req.url ?? '');
  if (target === undefined) throw new Refusal(400, 'bad_request', 'CONNECT needs host:port');
  const addresses = await front.admit('connect', target);
  const upstream = await front.routes.open(target, addresses);
  if (socket.destroyed || front.closed()) {
    upstream.destroy();
    return;
  }
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  front.splice(socket, upstream, head, target);
}
