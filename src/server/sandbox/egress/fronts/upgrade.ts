/**
 * The absolute-form upgrade front (WebSocket over plain HTTP: `GET http://host/ws` with
 * `Upgrade`): the request is read and admitted like a plain one, sent on a connection of its own,
 * and once the server answers 101 that connection and the client's are joined as a tunnel. A
 * server that declines the switch has its answer relayed as a plain response, then both close.
 */
import type http from 'node:http';
import type net from 'node:net';
import { forwardHeaders, label, responseHead } from '../proxy-http.js';
import { errorCode, Refusal } from '../refusal.js';
import { relayRequest, requestTarget } from './absolute-form.js';
import type { Front } from './front.js';

/** Serve one absolute-form upgrade; whatever goes wrong is answered on the socket. */
export function serveUpgrade(
  front: Front,
  req: http.IncomingMessage,
  socket: net.Socket,
  head: Buffer,
): void {
  upgrade(front, req, socket, head).catch((err: unknown) =>
    front.refuseRaw('upgrade', socket, err),
  );
}

async function upgrade(
  front: Front,
  req: http.IncomingMessage,
  socket: net.Socket,
  head: Buffer,
): Promise<void> {
  const read = requestTarget(req);
  const { target, host, framing } = read;
  // what follows an upgrade's head is the new protocol, relayed only after the upstream's 101
  if (framing.kind !== 'none') {
    throw new Refusal(400, 'bad_request', 'an upgrade request cannot have a body');
  }
  const addresses = await front.admit('upgrade', target, [
    host?.host,
    read.pathHost,
    ...read.forwarded,
  ]);
  if (socket.destroyed || front.closed()) return;
  const up = relayRequest(front, req, read, addresses, true);
  let answered = false;
  socket.once('close', () => {
    if (!answered) up.destroy();
  });
  up.once('upgrade', (upRes, upSocket, upHead) => {
    answered = true;
    socket.write(
      responseHead(upRes.statusCode ?? 101, upRes.statusMessage ?? '', upRes.rawHeaders),
    );
    if (upHead.length > 0) socket.write(upHead);
    // what the client then sends is read like a tunnel's (where the instance blocks domains):
    // after `Upgrade: h2c`, HTTP/2 would name any host in binary frames, and is refused there
    front.splice(socket, upSocket as net.Socket, head, target);
  });
  up.once('response', (upRes) => {
    // The server declined the switch: relay its answer as a plain response and close.
    answered = true;
    upRes.on('error', () => socket.destroy());
    const status = upRes.statusCode ?? 502;
    socket.write(
      responseHead(status, upRes.statusMessage ?? '', [
        ...forwardHeaders(upRes.rawHeaders),
        'Connection',
        'close',
      ]),
    );
    upRes.pipe(socket);
  });
  up.on('error', (err) => {
    if (answered) socket.destroy();
    else
      front.refuseRaw(
        'upgrade',
        socket,
        err instanceof Refusal
          ? err
          : new Refusal(502, 'upstream_failed', `${label(target)}: ${errorCode(err)}`),
      );
  });
  up.end();
}
