/**
 * The demo's local site on 127.0.0.1 (port 0): a login that sets an HttpOnly session cookie and
 * a localStorage token, and an account page that shows both. Nothing leaves the machine.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const DEMO_USER = 'demo';
export const DEMO_PASSWORD = 'burrow';
const COOKIE = 'burrow_demo_session';
const TOKEN_KEY = 'burrow_demo_token';

export interface DemoSite extends AsyncDisposable {
  /** e.g. `http://127.0.0.1:40123` */
  readonly url: string;
  close(): Promise<void>;
}

const page = (title: string, body: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>` +
  `<style>body{font:16px system-ui;margin:3em}p{margin:.5em 0}</style></head>` +
  `<body><h1>${title}</h1>${body}</body></html>`;

function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

async function formOf(req: IncomingMessage): Promise<URLSearchParams> {
  let text = '';
  for await (const chunk of req) text += String(chunk);
  return new URLSearchParams(text);
}

export async function serveDemoSite(): Promise<DemoSite> {
  const sessions = new Set<string>();
  const send = (res: ServerResponse, status: number, html: string, headers = {}) =>
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers }).end(html);

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/login' && req.method === 'POST') {
      void formOf(req).then((form) => {
        if (form.get('user') !== DEMO_USER || form.get('password') !== DEMO_PASSWORD) {
          return send(res, 401, page('Login failed', '<p id="status">wrong password</p>'));
        }
        const sid = randomBytes(16).toString('hex');
        sessions.add(sid);
        const token = randomBytes(8).toString('hex');
        send(
          res,
          200,
          page(
            'Welcome',
            `<p id="status">signed-in</p><script>localStorage.setItem('${TOKEN_KEY}', '${token}');</script>`,
          ),
          { 'set-cookie': `${COOKIE}=${sid}; HttpOnly; SameSite=Lax; Path=/` },
        );
      });
      return;
    }
    if (path === '/login') {
      return send(
        res,
        200,
        page(
          'Sign in',
          `<form method="post" action="/login">
             <p><label>User <input name="user" autocomplete="username"></label></p>
             <p><label>Password <input name="password" type="password"></label></p>
             <p><button type="submit">Sign in</button></p>
           </form>`,
        ),
      );
    }
    if (path === '/account') {
      const sid = cookieOf(req, COOKIE);
      const signedIn = sid !== undefined && sessions.has(sid);
      return send(
        res,
        200,
        page(
          'Account',
          `<p>${signedIn ? `Signed in as <b>${DEMO_USER}</b> (HttpOnly session cookie).` : 'Not signed in.'}</p>` +
            `<p id="status">${signedIn ? 'signed-in' : 'signed-out'}</p>` +
            `<p id="token"></p><script>document.getElementById('token').textContent =` +
            ` localStorage.getItem('${TOKEN_KEY}') ? 'token-present' : 'token-missing';</script>`,
        ),
      );
    }
    send(res, 404, page('Not found', ''));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }));
  return { url: `http://127.0.0.1:${port}`, close, [Symbol.asyncDispose]: close };
}
