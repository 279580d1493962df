/**
 * The upstream proxy of a start (`proxy` of `POST /v1/start`, the MCP server's `--proxy-server`)
 * and the one reading of its address. The start schema refuses what `parseProxyServer` cannot
 * read, and the server's egress takes the scheme, host and port it chains to from the same
 * reading: what the API accepts and what the egress dials cannot drift apart.
 */
import { z } from 'zod';

/** Schemes of the upstream proxies the egress chains to; `socks5h` is read as `socks5`. */
export const PROXY_SCHEMES = ['http', 'https', 'socks5', 'socks5h'] as const;

/** A scheme as the egress speaks it (`socks5h` is `socks5`: names always go to the upstream). */
export type ProxyScheme = 'http' | 'https' | 'socks5';

/** An upstream proxy's address, as `parseProxyServer` reads it. */
export interface ProxyServer {
  scheme: ProxyScheme;
  /**
   * As the URL parser spells it (special schemes lower-cased and IDNA-encoded), IPv6 without its
   * brackets. The server reduces it to its own one spelling of a host before using it.
   */
  host: string;
  /** The scheme's default (80, 443, 1080) when `server` names none. */
  port: number;
}

const DEFAULT_PORTS: Record<ProxyScheme, number> = { http: 80, https: 443, socks5: 1080 };

/**
 * Read `server` as Playwright takes it: `scheme://host:port`, or `host:port` meaning `http://`;
 * no credentials, path, query or fragment in it. A reason (to follow "proxy server …") when it is
 * no address of a proxy the egress can use.
 */
export function parseProxyServer(server: string): ProxyServer | { error: string } {
  const text = server.trim();
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return { error: 'is not a proxy address (expected scheme://host:port)' };
  }
  const raw = url.protocol.slice(0, -1).toLowerCase();
  if (!(PROXY_SCHEMES as readonly string[]).includes(raw)) {
    return { error: `scheme ${raw}:// is not supported (http://, https:// or socks5://)` };
  }
  const scheme = raw === 'socks5h' ? 'socks5' : (raw as ProxyScheme);
  if (url.hostname === '') return { error: 'has no host' };
  if (url.username !== '' || url.password !== '') {
    return { error: 'must not carry credentials: give them as username and password' };
  }
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') {
    return { error: 'must not have a path, query or fragment (expected scheme://host:port)' };
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port === '' ? DEFAULT_PORTS[scheme] : Number(url.port);
  return { scheme, host, port };
}

/** Why `server` is no usable upstream address (`parseProxyServer`'s reason), or `undefined`. */
export function proxyServerProblem(server: string): string | undefined {
  const parsed = parseProxyServer(server);
  return 'error' in parsed ? parsed.error : undefined;
}

/**
 * The instance's upstream proxy: its egress chains every connection to it (after its own checks),
 * except to the hosts of `bypass` (comma-separated, each with its subdomains, as Playwright's).
 * The credentials are kept in memory only and never answered.
 */
export const ProxySettings = z
  .object({
    server: z
      .string()
      .min(1)
      .max(2048)
      .superRefine((server, ctx) => {
        const problem = proxyServerProblem(server);
        if (problem) ctx.addIssue({ code: 'custom', message: `proxy server ${problem}` });
      }),
    username: z.string().max(255).optional(),
    password: z.string().max(255).optional(),
    bypass: z.string().max(4096).optional(),
  })
  .refine((p) => p.password === undefined || p.username !== undefined, {
    message: 'a proxy password needs a username',
    path: ['username'],
  });
export type ProxySettings = z.input<typeof ProxySettings>;
