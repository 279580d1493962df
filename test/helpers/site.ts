/**
 * A tiny website on 127.0.0.1 (port 0) for browser tests.
 *
 * - `POST /login` (the form at `/login`) sets an HttpOnly session cookie and, from the page it
 *   returns, a localStorage token and a sessionStorage value, then goes to `/me`.
 * - `/me` shows "Logged in as alice" in `#status` only when both the cookie and the matching
 *   localStorage token are present; `#session` shows the sessionStorage value (or "none").
 * - Any other path answers a page whose body names the host it was reached by.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestSite {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  port: number;
  /** The `Host` header of every request the site received, in order. */
  hosts: string[];
  close(): Promise<void>;
}

const page = (title: string, body: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body>${body}</body></html>`;

export async function startSite(): Promise<TestSite> {
  const sessions = new Map<string, { user: string; token: string }>(); // sid → session

  const hosts: string[] = [];
  const server = createServer((req, res) => {
    hosts.push(req.headers.host ?? '');
    const url = new URL(req.url ?? '/', 'http://site');
    const html = (status: number, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers });
      res.end(body);
    };

    if (url.pathname === '/login' && req.method === 'POST') {
      void readBody(req).then((body) => {
        const user = new URLSearchParams(body).get('user') || 'alice';
        const sid = randomBytes(16).toString('hex');
        const token = randomBytes(16).toString('hex');
        sessions.set(sid, { user, token });
        html(
          200,
          page(
            'Welcome',
            `<script>
              localStorage.setItem('token', ${JSON.stringify(token)});
              sessionStorage.setItem('greeting', 'hello ' + ${JSON.stringify(user)});
              location.replace('/me');
            </script>`,
          ),
          { 'set-cookie': `sid=${sid}; HttpOnly; Path=/; SameSite=Lax` },
        );
      });
      return;
    }
    if (url.pathname === '/login') {
      return html(
        200,
        page(
          'Log in',
          `<form method="post" action="/login">
            <input name="user" value="alice"><button id="login" type="submit">Log in</button>
          </form>`,
        ),
      );
    }
    if (url.pathname === '/me') {
      const sid = /(?:^|;\s*)sid=([0-9a-f]+)/.exec(req.headers.cookie ?? '')?.[1];
      const session = sid ? sessions.get(sid) : undefined;
      const script = session
        ? `<script>
            document.getElementById('status').textContent =
              localStorage.getItem('token') === ${JSON.stringify(session.token)}
                ? ${JSON.stringify(`Logged in as ${session.user}`)}
                : 'Not logged in';
          </script>`
        : '';
      return html(
        200,
        page(
          'Me',
          `<p id="status">Not logged in</p>${script}
          <p id="session"></p>
          <script>
            document.getElementById('session').textContent =
              sessionStorage.getItem('greeting') ?? 'none';
          </script>`,
        ),
      );
    }
    html(200, page(`Page ${url.pathname}`, `<p id="host">hello ${req.headers.host ?? ''}</p>`));
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    hosts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => resolve(body));
    req.on('error', reject);
  });
}
