/**
 * The server's pino logger and what keeps secrets out of it. Every serialised line passes through
 * `redactSecrets` before it is written, so the API key cannot reach a log whichever field or
 * message carries it (a query string, another header, a path, an error); request URLs are logged
 * with the values of key-, token-, secret- and password-like query parameters redacted; and
 * header objects never show `x-api-key`, `authorization` or `cookie`.
 */
import type { FastifyBaseLogger } from 'fastify';
import { pino, type DestinationStream } from 'pino';

export const REDACTED = '[redacted]';
const MIN_SECRET = 4;

/** Query parameters whose values are never logged, whatever they hold. */
const SENSITIVE_PARAM = /key|token|secret|passw|pwd|authorization|credential|signature|cookie/i;

const decode = (s: string) => {
  try {
    return decodeURIComponent(s.replaceAll('+', ' '));
  } catch {
    return s;
  }
};

/** The forms a secret takes in a log line: as is, URL-encoded, and escaped inside JSON. */
function secretForms(secrets: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const s of secrets) {
    if (s.length < MIN_SECRET) continue; // too short to redact without mangling every line
    for (const f of [s, encodeURIComponent(s)]) {
      forms.add(f);
      forms.add(JSON.stringify(f).slice(1, -1));
    }
  }
  // longest first, so that a form containing another is replaced whole
  return [...forms].sort((a, b) => b.length - a.length);
}

/** A function that replaces every occurrence of each secret (in any of its forms) in a text. */
export function secretRedactor(secrets: readonly string[]): (text: string) => string {
  const forms = secretForms(secrets);
  return (text) => {
    for (const form of forms) {
      if (text.includes(form)) text = text.split(form).join(REDACTED);
    }
    return text;
  };
}

function urlRedactor(secrets: readonly string[]): (url: string) => string {
  const redact = secretRedactor(secrets);
  const values = secrets.filter((s) => s.length >= MIN_SECRET);
  return (url) => {
    const q = url.indexOf('?');
    let out = url;
    if (q >= 0) {
      const query = url
        .slice(q + 1)
        .split('&')
        .map((pair) => {
          const eq = pair.indexOf('=');
          if (eq < 0) return pair;
          const name = decode(pair.slice(0, eq));
          const value = decode(pair.slice(eq + 1));
          const secret = SENSITIVE_PARAM.test(name) || values.some((s) => value.includes(s));
          return secret ? `${pair.slice(0, eq)}=${REDACTED}` : pair;
        })
        .join('&');
      out = `${url.slice(0, q)}?${query}`;
    }
    return redact(out);
  };
}

/** `{method, url}` of a request (Fastify's or Node's), its URL redacted. */
export function requestSerializer(secrets: readonly string[]) {
  const redact = urlRedactor(secrets);
  return (req: { method?: string; url?: string }) => ({
    method: req.method,
    url: redact(req.url ?? ''),
  });
}

const HEADER_PATHS = ['x-api-key', 'authorization', 'cookie', 'proxy-authorization'].flatMap(
  (h) => [`req.headers["${h}"]`, `*.headers["${h}"]`],
);

export interface LoggerOptions {
  /** Strings never written to the log (the API key): replaced by `[redacted]` in every line. */
  secrets?: readonly string[];
  /** Where lines go. Default stdout. */
  destination?: DestinationStream;
}

/** The server's pino logger at `level`, writing JSON lines with secrets redacted. */
export function createLogger(level: string, options: LoggerOptions = {}): FastifyBaseLogger {
  const secrets = options.secrets ?? [];
  const settings = {
    level,
    serializers: { req: requestSerializer(secrets) },
    redact: { paths: HEADER_PATHS, censor: REDACTED },
    hooks: { streamWrite: secretRedactor(secrets) },
  };
  return options.destination ? pino(settings, options.destination) : pino(settings);
}
