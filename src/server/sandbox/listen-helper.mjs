// Runs inside an instance (see Sandbox.listen in sandbox.ts): opens a TCP listener on the
// instance's own loopback and sends the listening socket to the burrow server over the IPC
// channel. It stays until the server, holding the socket, closes the channel: exiting earlier
// could let the server see the exit before the message.
import { createServer } from 'node:net';

const port = Number(process.argv[process.argv.length - 1]);
const server = createServer();
server.once('error', (err) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
process.once('disconnect', () => process.exit(0));
server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
  process.send?.('listening', server);
});
