/**
 * A site on 127.0.0.1 (port 0) whose login lives only in IndexedDB, the way Firebase Auth keeps
 * it: database `firebaseLocalStorageDb` (version 1), store `firebaseLocalStorage` with key path
 * `fbase_key`, one record per signed-in user whose `value` is a nested object holding the token.
 * No cookie, localStorage or sessionStorage is used.
 *
 * - `/login` signs alice in (the server issues a token, the page stores it) and shows `#status`
 *   "Signed in as alice"; it also writes a record that is not plain JSON (a `Date`, a
 *   `Uint8Array`, a `Map`, `undefined` inside an object) in store `extras`, which has out-of-line
 *   keys (a `Date` key), so the non-JSON encoding travels too.
 * - `/` reads IndexedDB (without creating the database) and asks the server whether the token is
 *   valid: `#status` is "Signed in as alice" only then, else "Signed out"; `#extra` describes the
 *   extras record ("none" without it).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface IdbSite {
  origin: string;
  close(): Promise<void>;
}

/** What `#extra` shows when the extras record came through intact. */
export const EXTRA_OK =
  'date=2024-01-02T03:04:05.000Z bytes=1,2,250 map=a:1 undef=true key=2020-05-06T00:00:00.000Z';

const READ = `
const done = (r) => new Promise((res, rej) => { r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
async function openDb() {
  const dbs = await indexedDB.databases();
  if (!dbs.some((d) => d.name === 'firebaseLocalStorageDb')) return undefined;
  return done(indexedDB.open('firebaseLocalStorageDb'));
}`;

const page = (title: string, script: string) => `<!doctype html><html><head><title>${title}</title>
</head><body><p id="status">…</p><p id="extra">…</p><script>${READ}
${script}</script></body></html>`;

export async function startIdbSite(): Promise<IdbSite> {
  const tokens = new Map<string, string>(); // token → user
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://site');
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (url.pathname === '/api/token') {
      const token = randomBytes(16).toString('hex');
      tokens.set(token, 'alice');
      return send(200, 'application/json', JSON.stringify({ token }));
    }
    if (url.pathname === '/api/me') {
      const user = tokens.get(url.searchParams.get('token') ?? '');
      return send(user ? 200 : 401, 'application/json', JSON.stringify({ user: user ?? null }));
    }
    if (url.pathname === '/login') {
      return send(
        200,
        'text/html; charset=utf-8',
        page(
          'Log in',
          `(async () => {
  const { token } = await (await fetch('/api/token')).json();
  const open = indexedDB.open('firebaseLocalStorageDb', 1);
  open.onupgradeneeded = () => {
    open.result.createObjectStore('firebaseLocalStorage', { keyPath: 'fbase_key' });
    const extras = open.result.createObjectStore('extras');
    extras.createIndex('by_kind', 'kind', { unique: false });
  };
  const db = await done(open);
  const tx = db.transaction(['firebaseLocalStorage', 'extras'], 'readwrite');
  tx.objectStore('firebaseLocalStorage').put({
    fbase_key: 'firebase:authUser:AIzaTest:[DEFAULT]',
    value: {
      uid: 'u-alice', email: 'alice@example.test', emailVerified: true,
      stsTokenManager: { accessToken: token, refreshToken: 'r-' + token, expirationTime: 4102444800000 },
      providerData: [{ providerId: 'password', uid: 'alice@example.test' }],
    },
  });
  tx.objectStore('extras').put({
    kind: 'mixed', when: new Date('2024-01-02T03:04:05.000Z'), bytes: new Uint8Array([1, 2, 250]),
    map: new Map([['a', 1]]), nothing: undefined,
  }, new Date('2020-05-06T00:00:00.000Z'));
  await new Promise((r) => (tx.oncomplete = r));
  db.close();
  document.getElementById('status').textContent = 'Signed in as alice';
})();`,
        ),
      );
    }
    if (url.pathname === '/') {
      return send(
        200,
        'text/html; charset=utf-8',
        page(
          'Home',
          `(async () => {
  const status = document.getElementById('status');
  const extra = document.getElementById('extra');
  const db = await openDb();
  if (!db || !db.objectStoreNames.contains('firebaseLocalStorage')) {
    db?.close();
    status.textContent = 'Signed out';
    extra.textContent = 'none';
    return;
  }
  const tx = db.transaction(db.objectStoreNames, 'readonly');
  const users = await done(tx.objectStore('firebaseLocalStorage').getAll());
  let text = 'none';
  if (db.objectStoreNames.contains('extras')) {
    const store = tx.objectStore('extras');
    const [keys, values] = await Promise.all([done(store.getAllKeys()), done(store.getAll())]);
    const v = values[0];
    if (v) {
      text = 'date=' + (v.when instanceof Date ? v.when.toISOString() : typeof v.when) +
        ' bytes=' + (v.bytes instanceof Uint8Array ? [...v.bytes].join(',') : typeof v.bytes) +
        ' map=' + (v.map instanceof Map ? [...v.map].map(([k, x]) => k + ':' + x).join(',') : typeof v.map) +
        ' undef=' + ('nothing' in v && v.nothing === undefined) +
        ' key=' + (keys[0] instanceof Date ? keys[0].toISOString() : typeof keys[0]);
    }
  }
  db.close();
  extra.textContent = text;
  const token = users[0]?.value?.stsTokenManager?.accessToken;
  const me = token ? await (await fetch('/api/me?token=' + token)).json() : { user: null };
  status.textContent = me.user ? 'Signed in as ' + me.user : 'Signed out';
})();`,
        ),
      );
    }
    send(200, 'text/html; charset=utf-8', '<!doctype html><title>other</title><p>other</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
