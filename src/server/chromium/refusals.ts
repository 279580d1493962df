/**
 * Commands the relay answers itself with an error instead of passing them to Chromium, whatever
 * session they name. A `cdp_url` holder drives the instance's browser, but every command it sends
 * goes through the relay (mux.ts), where sessions are owned and navigations checked against the
 * egress; these would let the browser act around that:
 *
 * - `Target.exposeDevToolsProtocol` gives a target's page a binding that speaks the protocol to
 *   the browser target directly: a page (any script the browser runs) would get an unfiltered
 *   DevTools connection, past every refusal below and the relay's session ownership.
 * - `Target.setRemoteLocations` makes the browser itself connect to addresses of the caller's
 *   choosing (remote-target discovery over TCP), connections no page asked for and no client
 *   library sends.
 * - `Tethering.bind` asks the browser to listen on a port and carry what connects to it over the
 *   protocol: a tunnel into the instance's network the relay cannot inspect.
 * - `Target.createBrowserContext` with a `proxyServer`: see `CONTEXT_PROXY_REFUSED`.
 *
 * `Target.attachToBrowserTarget` stays allowed: the session it gives is the client's, and its
 * commands come through the relay and these checks like any other.
 */
import type { CdpParams } from './transport.js';

/**
 * Why a browser context with a proxy of its own is refused: Chromium would send that context's
 * traffic to the named proxy itself, around the instance's egress (where `blocked_domains` and the
 * host-local refusals hold), and the DevTools protocol never carries the proxy's credentials. The
 * instance's own upstream (`proxy` at start) serves every context instead.
 */
export const CONTEXT_PROXY_REFUSED =
  "burrow: a browser context cannot have a proxy of its own (it would bypass the instance's egress); start the instance with the proxy instead: POST /v1/start { proxy }, openSession({ proxy })";

/** Methods refused whatever their parameters, with the reason the client is told. */
const REFUSED_METHODS: ReadonlyMap<string, string> = new Map([
  [
    'Target.exposeDevToolsProtocol',
    "it would give a page the DevTools protocol past the relay's checks",
  ],
  ['Target.setRemoteLocations', 'it would make the browser connect to addresses of its own'],
  ['Tethering.bind', "it would tunnel connections into the instance's network"],
]);

/** The error message refusing `method` with `params`, or undefined when it may go to Chromium. */
export function refusal(method: string, params: CdpParams): string | undefined {
  if (method === 'Target.createBrowserContext' && params.proxyServer !== undefined) {
    return CONTEXT_PROXY_REFUSED;
  }
  const why = REFUSED_METHODS.get(method);
  return why === undefined ? undefined : `burrow: ${method} is refused: ${why}`;
}
