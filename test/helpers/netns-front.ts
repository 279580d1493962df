/**
 * The cluster's public address in the multi-machine harness (netns-cluster.ts): what a load
 * balancer or a Kubernetes Service is in front of real nodes. It listens on the address and
 * port given as arguments and joins each connection to the node it was last told over IPC
 * (`{ to: 'host:port' }`, answered `{ ok: true }`), byte for byte.
 */
import { connect, createServer } from 'node:net';

const [host, port] = process.argv.slice(2);
let target: { host: string; port: number } | undefined;

const server = createServer((client) => {
  if (!target) return client.destroy();
  const upstream = connect(target);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
  client.pipe(upstream).pipe(client);
});
server.listen(Number(port), host, () => process.send!({ listening: true }));

process.on('message', (m: { to: string }) => {
  const i = m.to.lastIndexOf(':');
  target = { host: m.to.slice(0, i), port: Number(m.to.slice(i + 1)) };
  process.send!({ ok: true });
});
process.on('disconnect', () => process.exit(0));
