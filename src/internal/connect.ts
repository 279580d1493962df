/**
 * Connect-with-timeout, written once: a TCP or Unix socket that is connected, or an error
 * (the connection's own, or the given one when the deadline passed) with the half-open socket
 * destroyed.
 */
import { once } from 'node:events';
import { connect, type NetConnectOpts, type Socket } from 'node:net';
import { background } from './background.js';
import { withDeadline } from './deadline.js';

/**
 * Connects to `opts` (`{ path }` or `{ host, port }`); rejects with `timeoutError` if the
 * connection is not up within `ms` milliseconds. The socket comes back with no listeners of
 * this function left on it: the caller adds its own `error` handler.
 */
export async function connectWithDeadline(
  opts: NetConnectOpts,
  ms: number,
  timeoutError: Error | (() => Error),
): Promise<Socket> {
  const socket = connect(opts);
  const stop = new AbortController();
  try {
    await withDeadline(once(socket, 'connect', { signal: stop.signal }), ms, timeoutError);
    return background(socket); // the server's own connection (X, VNC): background.ts
  } catch (err) {
    stop.abort(); // removes the listeners of `once` after a timeout
    socket.destroy();
    throw err;
  }
}
