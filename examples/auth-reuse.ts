/**
 * Log in once, reuse the login: the first session signs in on a site (an HttpOnly cookie and a
 * localStorage token) and saves the auth state; a second session on a fresh instance gets it
 * applied by `openSession({ authState })` and is signed in from the start.
 *
 *   node --import tsx examples/auth-reuse.ts
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { embeddedServer, openSession } from 'burrow-sandbox';

// A site whose /login sets the cookie and the token, and whose / says who is signed in.
const sessions = new Set<string>();
const site = createServer((req, res) => {
  const sid = /(?:^|; )sid=(\w+)/.exec(req.headers.cookie ?? '')?.[1];
  res.setHeader('content-type', 'text/html');
  if (req.url === '/login') {
    const id = randomBytes(8).toString('hex');
    sessions.add(id);
    res.setHeader('set-cookie', `sid=${id}; HttpOnly; Path=/`);
    res.end(`<script>localStorage.setItem('token', 't-${id}'); location.href = '/';</script>`);
  } else {
    const who = sid && sessions.has(sid) ? 'signed in' : 'signed out';
    res.end(`<p id="who">${who}</p><p id="token"></p>
      <script>document.getElementById('token').textContent = localStorage.getItem('token') ?? 'none'</script>`);
  }
});
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;

// Optional: keeps the embedded server up between the two sessions (it is shared anyway).
await using _server = await embeddedServer();

let stateId: string;
{
  await using first = await openSession();
  await first.page.goto(`${url}/login`);
  await first.page.waitForURL(`${url}/`);
  console.log(`first session:  ${await first.page.textContent('#who')}`);
  ({ id: stateId } = await first.auth.save('example-login'));
}

{
  await using second = await openSession({ authState: stateId }); // an id, or a unique name
  await second.page.goto(url);
  const who = await second.page.textContent('#who');
  const token = await second.page.textContent('#token');
  console.log(
    `second session: ${who}, localStorage token ${token === 'none' ? 'missing' : 'present'}`,
  );
  if (who !== 'signed in') process.exitCode = 1;
}
site.closeAllConnections();
site.close();
