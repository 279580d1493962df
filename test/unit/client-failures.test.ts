/**
 * Every failure the client raises is a `BurrowError` with a stable code: close() racing a call,
 * an upload source that errors mid-way, a header undici refuses, and the debug switch's lines.
 * The peer is a real HTTP server on 127.0.0.1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  Burrow,
  BurrowError,
  ClientClosedError,
  RequestFailedError,
} from '../../src/client/index.js';
import { debugEnabled } from '../../src/client/debug.js';

let server: Server;
let baseUrl: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify([]));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('client failures are BurrowErrors', () => {
  it('close() while an upload is being prepared: ClientClosedError, not undici’s', async () => {
    const client = new Burrow({ baseUrl, apiKey: 'k-0123456789' });
    const call = client.instance.upload('inst_x', {
      file: Readable.from([Buffer.from('abc')]),
      path: 'a.txt',
    });
    void client.close(); // the call passed the closed check and awaits its file part
    const err = await call.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientClosedError);
    expect(err).toBeInstanceOf(BurrowError);
    expect((err as ClientClosedError).code).toBe('client_closed');
  });

  it('an upload source that errors mid-way: RequestFailedError with the source error as cause', async () => {
    await using client = new Burrow({ baseUrl, apiKey: 'k-0123456789' });
    const boom = new Error('disk went away');
    const source = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024, 1));
        setImmediate(() => this.destroy(boom));
      },
    });
    const err = await client.instance
      .upload('inst_x', { file: source, path: 'a.bin' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BurrowError);
    expect((err as BurrowError).code).toMatch(/^(request_failed|connection_failed)$/);
    expect(String((err as Error).message)).toContain('POST /v1/instance/inst_x/upload');
  });

  it('a header value undici refuses: RequestFailedError', async () => {
    await using client = new Burrow({ baseUrl, apiKey: 'k-0123456789', maxRetries: 0 });
    const err = await client.instances
      .list({ headers: { 'x-bad': 'a\r\nb' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RequestFailedError);
    expect((err as RequestFailedError).code).toBe('request_failed');
    expect((err as Error).cause).toBeInstanceOf(Error);
  });
});

describe('debug output', () => {
  it('is selected by BURROW_LOG=debug or a DEBUG list naming burrow', () => {
    expect(debugEnabled('client', {})).toBe(false);
    expect(debugEnabled('client', { BURROW_LOG: 'debug' })).toBe(true);
    expect(debugEnabled('client', { DEBUG: 'burrow*' })).toBe(true);
    expect(debugEnabled('session', { DEBUG: 'express,burrow:session' })).toBe(true);
    expect(debugEnabled('client', { DEBUG: 'burrow:session' })).toBe(false);
    expect(debugEnabled('client', { DEBUG: '*,-burrow:client' })).toBe(false);
    expect(debugEnabled('client', { DEBUG: 'other' })).toBe(false);
  });

  it('prints each API call with method, path, status and milliseconds', async () => {
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    const before = process.env.BURROW_LOG;
    process.env.BURROW_LOG = 'debug';
    try {
      await using client = new Burrow({ baseUrl, apiKey: 'k-0123456789' });
      await client.instances.list();
    } finally {
      spy.mockRestore();
      if (before === undefined) delete process.env.BURROW_LOG;
      else process.env.BURROW_LOG = before;
    }
    expect(lines.join('')).toMatch(/^burrow:client GET \/v1\/instances 200 \d+ms$/m);
    expect(lines.join('')).not.toContain('k-0123456789');
  });
});
