/**
 * The relay's command bounds (api/cdp-limits.ts) against each other: a command a client may send
 * still fits Chromium's pipe reader once the relay has written its own id and session into it, so
 * a command the relay accepted never makes Chromium shut the pipe (a deaf browser for everyone).
 */
import { describe, expect, it } from 'vitest';
import { CDP_MAX_COMMAND_BYTES, CDP_MAX_COMMAND_WIRE_BYTES } from '../../src/api/cdp-limits.js';

describe('CDP_MAX_COMMAND_BYTES', () => {
  it('leaves room for the largest id and session the relay writes, and the NUL', () => {
    const largestRewrite =
      `{"id":${Number.MAX_SAFE_INTEGER},`.length + `,"sessionId":"${'S'.repeat(128)}"}`.length + 1;
    expect(CDP_MAX_COMMAND_BYTES + largestRewrite).toBeLessThanOrEqual(CDP_MAX_COMMAND_WIRE_BYTES);
  });
});
