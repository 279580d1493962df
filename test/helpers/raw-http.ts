/**
 * An HTTP/1.1 request written byte for byte: the path goes out exactly as given (`..`, `%2e%2e`,
 * `%2f` included), which `fetch` and `http.request` would resolve or re-encode first.
 */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

export function rawRequest(
  origin: string,
  path: string,
  {
    method = 'GET',
    headers = {},
    extraHead,
    body = '',
  }: {
    method?: string;
    headers?: Record<string, string>;
    /** Header lines as they go out (`\r\n` between them), e.g. a header sent twice. */
    extraHead?: string;
    body?: string;
  } = {},
): Promise<RawResponse> {
  const url = new URL(origin);
  const lines = [
    `${method} ${path} HTTP/1.1`,
    `Host: ${url.host}`,
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ...(extraHead === undefined ? [] : [extraHead]),
  ];
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = connect(Number(url.port), url.hostname, () => {
      sock.write(`${lines.join('\r\n')}\r\n\r\n${body}`);
    });
    sock.setTimeout(10_000, () => sock.destroy(new Error(`no answer to ${method} ${path}`)));
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', reject);
    sock.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const head = (end < 0 ? text : text.slice(0, end)).split('\r\n');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
      if (!status) {
        reject(new Error(`no HTTP answer to ${method} ${path}: ${JSON.stringify(head[0])}`));
        return;
      }
      const hdrs: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) hdrs[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({
        status: Number(status[1]),
        headers: hdrs,
        body: end < 0 ? '' : text.slice(end + 4),
      });
    });
  });
}
