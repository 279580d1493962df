/**
 * docs/server-errors.md and the server's error catalogue list the same rows, with the same status
 * and message, both ways (docs/architecture.md); and the catalogue behaves as its header says.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  HttpError,
  SERVER_ERRORS,
  formatMessage,
  rawErrorResponse,
  serverError,
  type ServerErrorCode,
} from '../../src/server/errors.js';

const doc = readFileSync(new URL('../../docs/server-errors.md', import.meta.url), 'utf8');
/** The tables' rows: | status | `code` | when | `message` | */
const rows = [...doc.matchAll(/^\| (\d{3}) \| `(\w+)` \| (.+) \| `([^`]*)` \|$/gm)].map((m) => ({
  status: Number(m[1]),
  code: m[2]!,
  when: m[3]!,
  message: m[4]!,
}));
const codes = Object.keys(SERVER_ERRORS) as ServerErrorCode[];

describe('docs/server-errors.md', () => {
  it('finds the table rows (sanity check of this test)', () => {
    expect(rows.length).toBeGreaterThanOrEqual(40);
    expect(rows.map((r) => r.code)).toContain('instance_not_found');
  });

  it.each(codes)('documents %s with its status and message', (code) => {
    const row = rows.find((r) => r.code === code);
    expect(row, `no row for ${code}`).toBeDefined();
    expect(row).toMatchObject({
      status: SERVER_ERRORS[code].status,
      message: SERVER_ERRORS[code].message,
    });
    expect(row!.when.trim()).not.toBe('');
  });

  it('documents no code the catalogue lacks, and each once', () => {
    for (const { code } of rows) expect(codes).toContain(code);
    expect(new Set(rows.map((r) => r.code)).size).toBe(rows.length);
  });
});

describe('the catalogue', () => {
  it('codes are snake_case and statuses are non-422 errors', () => {
    for (const code of codes) {
      expect(code).toMatch(/^[a-z]+(_[a-z0-9]+)*$/);
      const { status } = SERVER_ERRORS[code];
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).not.toBe(422);
    }
  });

  it('serverError fills the template and carries status, code and headers', () => {
    const err = serverError('node_draining', { node: 'node-1' });
    const detail = 'Node node-1 is draining and takes no new instances; start through another node';
    expect(err).toBeInstanceOf(HttpError);
    expect(err).toMatchObject({
      status: 503,
      code: 'node_draining',
      detail,
      message: detail,
    });
    expect(err.responseHeaders).toEqual({
      'Retry-After': '5',
      'x-burrow-error': 'node_draining',
    });
    expect(serverError('not_found').detail).toBe('Not Found');
  });

  it('params are inserted as given, never re-read as placeholders', () => {
    expect(formatMessage('a {x} b', { x: '{x}' })).toBe('a {x} b');
    expect(serverError('instance_not_found', { id: '{id}' }).detail).toBe(
      'Instance {id} not found',
    );
  });

  it('rejects unknown codes and missing params at compile time', () => {
    // @ts-expect-error: not a row of the catalogue
    expect(() => serverError('instance_missing')).toThrow();
    // @ts-expect-error: the template needs `id`
    expect(serverError('instance_not_found').detail).toBe('Instance {id} not found');
    // @ts-expect-error: `name` is not a placeholder of the template
    serverError('instance_not_found', { id: 'x', name: 'x' });
  });

  it('a raw answer is a complete response with the code header, closing the connection', () => {
    const text = rawErrorResponse(
      serverError('too_many_connections', { address: '::1', limit: 2 }),
    );
    const [head, body] = text.split('\r\n\r\n');
    const lines = head!.split('\r\n');
    expect(lines[0]).toBe('HTTP/1.1 429 Too Many Requests');
    expect(lines).toContain('x-burrow-error: too_many_connections');
    expect(lines).toContain('Retry-After: 1');
    expect(lines.filter((l) => /^connection:/i.test(l))).toEqual(['Connection: close']);
    expect(lines).toContain(`Content-Length: ${Buffer.byteLength(body!)}`);
    expect(JSON.parse(body!)).toEqual({
      detail: 'Too many open connections from ::1 (limit 2); close some and retry',
    });
  });
});
