// Runs inside an instance (see connect.ts): connects to a Unix socket by its path as the
// instance sees it, as the instance's user, and sends the connected socket to the burrow server
// over the IPC channel. It stays until the server, holding the socket, closes the channel, and
// gives up on its own after the deadline it is given.
import { Socket } from 'node:net';

const [path, deadline] = process.argv.slice(-2);
setTimeout(() => process.exit(2), Number(deadline));
const socket = new Socket();
// nothing is read here: bytes the peer sends at once must reach the server
socket.pause();
socket.once('error', (err) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
process.once('disconnect', () => process.exit(0));
socket.connect({ path }, () => process.send?.('connected', socket));
