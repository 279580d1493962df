/**
 * Why the egress does not serve a connection, in the one shape every part of it throws: a
 * `Refusal` carries the HTTP status the client is answered and a stable code (logged, sent as
 * `X-Burrow-Egress`, mapped to a navigation failure by `network.ts`). Anything else thrown inside
 * the egress is a bug, logged as such and answered 500 `internal`: no input from an instance can
 * throw out of it.
 */
import type { Logger } from '../../../internal/log.js';
import type { AddressRefusalCode } from './policy.js';
import type { UpstreamFailure } from './upstream.js';

export type EgressRefusalCode =
  | 'bad_request'
  | 'origin_form'
  | 'header_too_large'
  | 'blocked_domain'
  | AddressRefusalCode
  | 'blocked_sni'
  | 'tls_invalid'
  | 'dns_failed'
  | 'connect_failed'
  | 'upstream_failed'
  | 'timeout'
  | 'busy'
  | 'internal'
  | 'proxy_refused'
  | UpstreamFailure['code'];

/** Why a connection is not served; `status` is what the client is answered. */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: EgressRefusalCode,
    message: string,
  ) {
    super(message);
  }
}

/** The egress's decision on a target, from `Egress.check`. */
export interface EgressVerdict {
  code: EgressRefusalCode;
  message: string;
}

/** Which door a connection came in by, for logs: the three fronts and `Egress.check`. */
export type Kind = 'connect' | 'http' | 'upgrade' | 'navigate';

/**
 * The operator's switch behind a refusal, for logs and refusal bodies: a host-local port needs
 * `--allow-host-port`, a private network `--allow-network`, a blocked domain was asked for by the instance's `blocked_domains`.
 */
export function refusalHint(code: EgressRefusalCode, port: number): string | undefined {
  switch (code) {
    case 'host_local':
      return `burrow serve --allow-host-port ${port} (or --allow-host-loopback) lets instances reach it`;
    case 'blocked_domain':
    case 'blocked_sni':
      return "the instance's blocked_domains refuse it";
    case 'protected_port':
      return "burrow's own ports are never reachable from an instance";
    case 'private_network':
      return 'burrow serve --allow-network CIDR lets instances reach that network';
    default:
      return undefined;
  }
}

/** An error's code (`ECONNREFUSED`) or message, for logs and refusal messages. */
export function errorCode(err: unknown): string {
  const e = err as NodeJS.ErrnoException | undefined;
  return e?.code ?? e?.message ?? String(err);
}

/** `err` if it is a Refusal; anything else is a bug, logged, and answered 500 `internal`. */
export function asRefusal(err: unknown, log: Logger): Refusal {
  if (err instanceof Refusal) return err;
  log.error({ egress: 'internal', err: errorCode(err) }, 'egress: unexpected error');
  return new Refusal(500, 'internal', 'internal error');
}
