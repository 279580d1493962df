/** WebSocket handshakes as a client sees them, for tests of the token-checked upgrades. */
import { WebSocket } from 'ws';

/**
 * The HTTP status a WebSocket handshake to `url` gets: 101 when it opens (then it is closed at
 * once), else the status of the refusal.
 */
export function handshakeStatus(
  url: URL | string,
  opts: { protocols?: string[]; headers?: Record<string, string> } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, opts.protocols ?? [], { headers: opts.headers ?? {} });
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', reject);
  });
}
