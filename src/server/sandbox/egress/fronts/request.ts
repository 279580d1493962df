/**
 * The absolute-form request front (`GET http://host/path`, any number per keep-alive connection,
 * to any number of hosts): each request is read, admitted and relayed on its own, its response
 * relayed back without hop-by-hop headers. A refusal is an HTTP response; the client's connection
 * stays usable when it can.
 */
import type http from 'node:http';
import { forwardHeaders, label } from '../proxy-http.js';
import { errorCode, Refusal } from '../refusal.js';
import { relayRequest, requestTarget } from './absolute-form.js';
import type { Front } from './front.js';

/** Serve one absolute-form request; whatever goes wrong is answered on `res`. */
export function serveRequest(
  front: Front,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): void {
  // A request in flight is not idle (long polls wait for minutes); Node then skips the timeout.
  res.on('timeout', () => {});
  forward(front, req, res).catch((err: unknown) => front.refuseResponse(res, err));
}

async function forward(
  front: Front,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const read = requestTarget(req);
  const { target, host } = read;
  const addresses = await front.admit('http', target, [
    host?.host,
    read.pathHost,
    ...read.forwarded,
  ]);
  if (res.destroyed || front.closed()) return;
  const up = relayRequest(front, req, read, addresses, false);
  up.once('response', (upRes) => {
    upRes.on('error', () => res.destroy());
    try {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardHeaders(upRes.rawHeaders));
    } catch (err) {
      upRes.destroy();
      front.refuseResponse(
        res,
        new Refusal(502, 'upstream_failed', `${label(target)}: bad response (${errorCode(err)})`),
      );
      return;
    }
    upRes.pipe(res);
  });
  up.on('error', (err) => {
    front.refuseResponse(
      res,
      err instanceof Refusal
        ? err
        : new Refusal(502, 'upstream_failed', `${label(target)}: ${errorCode(err)}`),
    );
  });
  res.once('close', () => {
    if (!res.writableFinished) up.destroy();
  });
  req.on('error', () => up.destroy());
  req.pipe(up);
}
