/**
 * A raw CDP client on a `cdp_url`, as an attacker or a library without a driver holds one:
 * commands by id, replies matched by id, how its connection closed, and its socket (a slow reader
 * pauses it). `localAddress` picks the loopback address it comes from.
 */
import WebSocket from 'ws';

const MiB = 1024 * 1024;

export async function cdpClient(url: string, localAddress = '127.0.0.1') {
  const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 512 * MiB, localAddress });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  const waiting = new Map<number, (msg: Record<string, unknown>) => void>();
  ws.on('message', (data) => {
    const msg = JSON.parse(data.toString()) as Record<string, unknown>;
    if (typeof msg.id === 'number') waiting.get(msg.id)?.(msg);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  let next = 1;
  const send = (method: string, params = {}, sessionId?: string) => {
    const id = next++;
    ws.send(JSON.stringify({ id, method, params, ...(sessionId && { sessionId }) }));
    return id;
  };
  const call = (method: string, params = {}, sessionId?: string) =>
    new Promise<Record<string, unknown>>((resolve) => {
      waiting.set(send(method, params, sessionId), resolve);
    });
  const socket = (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
  return { ws, send, call, closed, socket };
}
