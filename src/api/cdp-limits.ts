/**
 * How large one CDP message may be on a `cdp_url`: what the server's relay lets through in each
 * direction, and so what a client in front of it (the bridge's transfer proxy) sizes its own
 * sockets to. Said here once; the server's DevTools pipe and relay import these too.
 */

/**
 * Longest message a browser sends: Chromium's own DevTools WebSocket server sends at most 256 MiB
 * (`kSendBufferSizeForDevTools`), and Playwright and Puppeteer accept as much.
 */
export const CDP_MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/**
 * Longest message written to Chromium, NUL included: its pipe reader buffers at most 100 MiB
 * (`kReceiveBufferSizeForDevTools`) and shuts the pipe down past it.
 */
export const CDP_MAX_COMMAND_WIRE_BYTES = 100 * 1024 * 1024;

/**
 * Largest command a `cdp_url` client may send: under what Chromium's reader holds, with room for
 * the id and session the relay writes anew (past it the relay closes with 1009).
 */
export const CDP_MAX_COMMAND_BYTES = CDP_MAX_COMMAND_WIRE_BYTES - 4 * 1024 * 1024;
