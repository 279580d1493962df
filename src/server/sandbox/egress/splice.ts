/**
 * Moving bytes between an instance's connection and the one the egress made for it, and ending
 * connections. Two bounds hold here: a tunnel's first flight is held back, at most
 * `MAX_SNIFF_BYTES` for at most the hello deadline, until it is known not to be a TLS ClientHello
 * naming a blocked domain (domain fronting: the CONNECT target allowed, the SNI not); and a
 * refused client gets `LINGER_MS` to read its answer, however much it keeps sending. A tunnel
 * that does not carry TLS is held to the `Host` rule line by line (`host-lines.ts`).
 */
import type net from 'node:net';
import { bytesPerTurn } from '../../../internal/cpu-share.js';
import type { Logger } from '../../../internal/log.js';
import { HostLines } from './host-lines.js';
import { label, plainResponse, type Authority } from './proxy-http.js';
import type { EgressRefusalCode } from './refusal.js';
import { MAX_CLIENT_HELLO_BYTES, sniffClientHello } from './sni.js';

/** What a byte of a tunnel whose lines are read is charged to the turn's bytes. */
const LINE_BYTE_COST = 4;
/** Bytes of a tunnel's first flight held back while its ClientHello is read. */
const MAX_SNIFF_BYTES = 2 * MAX_CLIENT_HELLO_BYTES;
/** How long a refused client gets to read the answer before its socket is destroyed, in ms. */
const LINGER_MS = 2_000;
/** TLS alert record: fatal (2), access_denied (49). */
const TLS_ACCESS_DENIED = Uint8Array.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31]);

/**
 * Close `socket` gently: send `answer` (if any) and FIN, keep reading and dropping what the peer
 * still sends (closing with unread bytes would reset the connection and could discard the answer
 * before the peer reads it); it closes once the peer's FIN arrives, or is destroyed
 * `LINGER_MS` after, whatever the peer sends meanwhile.
 */
export function hangUp(socket: net.Socket, answer?: string | Uint8Array): void {
  if (socket.destroyed) return;
  if (socket.writableEnded && answer !== undefined) {
    socket.destroy();
    return;
  }
  socket.on('data', () => {});
  socket.resume();
  // a deadline, not an idle timer: a peer that keeps sending must not keep the socket open
  const deadline = setTimeout(() => socket.destroy(), LINGER_MS);
  deadline.unref();
  socket.once('close', () => clearTimeout(deadline));
  // autoDestroy closes it once both sides have ended.
  if (socket.writableEnded) return;
  if (answer === undefined) socket.end();
  else socket.end(answer);
}

/** What a CONNECT tunnel's first flight is read for before any of it goes upstream. */
export interface Sniff {
  /** The CONNECT target, for logs. */
  target: Authority;
  /** The blocked domain a server name falls under, else `undefined` (read at decision time). */
  blocked: (name: string) => string | undefined;
  /** Time for a started ClientHello to arrive whole, in ms. */
  helloTimeoutMs: number;
  log: Logger;
}

/**
 * Join a client and an upstream socket both ways, half-close included. With `sniff`, client
 * bytes are held back until they are known not to be a TLS ClientHello naming a blocked domain;
 * one that does is answered a TLS `access_denied` alert and nothing of it reaches the upstream.
 */
export function splice(
  client: net.Socket,
  upstream: net.Socket,
  head: Buffer,
  sniff: Sniff | undefined,
): void {
  client.setTimeout(0); // a tunnel may idle for long (WebSockets); keepalive finds dead peers
  client.allowHalfOpen = true;
  upstream.allowHalfOpen = true;
  // Once one side is closed both ways, nothing more can reach it: the other side sends what it
  // still holds, then goes too (at once after an error).
  client.once('close', (hadError) => (hadError ? upstream.destroy() : hangUp(upstream)));
  upstream.once('close', (hadError) => (hadError ? client.destroy() : hangUp(client)));
  upstream.pipe(client);

  const forward = (first: Buffer) => {
    if (first.length > 0) upstream.write(first);
    client.pipe(upstream);
    if (client.readableEnded && !upstream.writableEnded) upstream.end();
  };
  if (sniff === undefined) {
    forward(head);
    return;
  }
  // Not TLS: every line that names a host passes the blocked domains first (host-lines.ts).
  const forwardWatched = (first: Buffer) => {
    const lines = new HostLines(sniff.blocked);
    const take = (verdict: ReturnType<HostLines['feed']>): boolean => {
      if ('blocked' in verdict) {
        client.off('data', onChunk);
        sniff.log.debug({
          egress: 'connect',
          target: label(sniff.target),
          decision: 'refused',
          code: 'blocked_domain',
          host: verdict.blocked,
        });
        upstream.destroy();
        const message = `${verdict.blocked} is blocked; the instance's blocked_domains refuse it`;
        hangUp(client, plainResponse(403, 'blocked_domain', message));
        return false;
      }
      if (verdict.pass.length > 0 && !upstream.write(verdict.pass)) {
        client.pause();
        upstream.once('drain', () => client.resume());
      }
      return true;
    };
    const onChunk = (chunk: Buffer) => {
      if (!take(lines.feed(chunk))) return;
      // past the main thread's bytes for this turn, read on in the next (internal/cpu-share.ts);
      // a byte whose line is read costs about four that are only relayed (0.1-0.4 ms per 64 KiB
      // of lines, against unmasking and copying at about 1.5 ms per MiB)
      bytesPerTurn.pace(
        client,
        chunk.length * LINE_BYTE_COST,
        () => !upstream.writableNeedDrain && !client.destroyed,
      );
    };
    const onEnd = () => {
      if (upstream.destroyed) return;
      if (take(lines.end()) && !upstream.writableEnded) upstream.end();
    };
    if (first.length > 0 && !take(lines.feed(first))) return;
    client.on('data', onChunk);
    if (client.readableEnded) onEnd();
    else client.once('end', onEnd);
    client.resume();
  };

  let held = head;
  let timer: NodeJS.Timeout | undefined;
  const settle = () => {
    clearTimeout(timer);
    client.off('data', onData);
    client.off('end', onEnd);
    client.off('close', settle);
  };
  const refuse = (code: EgressRefusalCode, detail: object) => {
    settle();
    sniff.log.debug({
      egress: 'connect',
      target: label(sniff.target),
      decision: 'refused',
      code,
      ...detail,
    });
    upstream.destroy();
    hangUp(client, TLS_ACCESS_DENIED);
  };
  // Decide on what is held; true once decided (forwarded or refused).
  const decide = (): boolean => {
    const hello = sniffClientHello(held);
    switch (hello.kind) {
      case 'incomplete':
        if (held.length === 0) return false;
        if (held.length > MAX_SNIFF_BYTES) {
          refuse('tls_invalid', { reason: 'ClientHello too large' });
          return true;
        }
        timer ??= setTimeout(
          () => refuse('timeout', { reason: 'ClientHello incomplete' }),
          sniff.helloTimeoutMs,
        ).unref();
        return false;
      case 'invalid':
        refuse('tls_invalid', { reason: hello.reason });
        return true;
      case 'client-hello': {
        for (const name of hello.serverNames) {
          const hit = sniff.blocked(name);
          if (hit !== undefined) {
            refuse('blocked_sni', { server_name: name });
            return true;
          }
        }
        break;
      }
      case 'not-tls':
        settle();
        forwardWatched(held);
        return true;
    }
    settle();
    forward(held);
    return true;
  };
  const onData = (chunk: Buffer) => {
    held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
    decide();
  };
  const onEnd = () => {
    // The client finished sending before a decision: nothing at all passes, or a partial hello.
    if (held.length === 0) {
      settle();
      forward(held);
    } else refuse('tls_invalid', { reason: 'client closed mid-ClientHello' });
  };
  if (decide()) return;
  client.on('data', onData);
  client.once('end', onEnd);
  client.once('close', settle);
}
