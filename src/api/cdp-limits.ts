/**
 * The sizes of DevTools messages, said once for both sides: the server (its pipe to Chromium,
 * src/server/chromium/pipe.ts; the multiplexer on it, mux.ts; the relay behind `cdp_url`,
 * relay.ts) and the bridge (the local proxy in front of a `cdp_url`, src/session/transfer.ts).
 * When Chromium's own buffers change, this table changes, and both sides with it: a bridge that
 * allowed more than the server sends, or less than it, is how the two drifted apart before.
 *
 * Plain numbers, no I/O: src/api/ is the one place the server and the bridge both import.
 */

const MiB = 1024 * 1024;

/**
 * Longest message read from Chromium, and so the longest the relay sends a client: Chromium's own
 * DevTools WebSocket server sends at most 256 MiB (`kSendBufferSizeForDevTools`), and Playwright
 * and Puppeteer accept as much. Any process of the instance may hold a copy of the pipe
 * (pidfd_getfd), so past this the pipe is failed.
 */
export const CDP_MAX_MESSAGE_BYTES = 256 * MiB;

/**
 * Longest message written to Chromium, NUL included: its pipe reader buffers at most 100 MiB
 * (`kReceiveBufferSizeForDevTools`) and shuts the pipe down past it (the browser keeps running,
 * deaf), so a longer one is refused before it is written.
 */
export const CDP_MAX_COMMAND_WIRE_BYTES = 100 * MiB;

/**
 * Largest command a `cdp_url` client may send (a longer frame closes it, 1009): under what
 * Chromium's DevTools reader holds (over a socket and over the pipe alike), with room for the id
 * and session the relay writes anew. File contents go through the `upload` operation; big
 * `Runtime.evaluate` and `DOM.setFileInputFiles` commands fit.
 */
export const CDP_MAX_COMMAND_BYTES = CDP_MAX_COMMAND_WIRE_BYTES - 4 * MiB;

/**
 * Bytes a relay client may leave unread before its next message closes it (1008): many seconds
 * of a busy screencast on a slow link; one message larger than this still goes to a client that
 * keeps up.
 */
export const CDP_MAX_UNREAD_BYTES = 64 * MiB;

/**
 * Bytes all relay clients of one browser, and all relay clients of the server, may leave unread
 * together: past either, the client with the most unread is closed (1008) at its next message.
 * Each client's own bound alone let six slow readers hold 432 MB (issue 35).
 */
export const CDP_MAX_UNREAD_BYTES_PER_BROWSER = 128 * MiB;
export const CDP_MAX_UNREAD_BYTES_TOTAL = 256 * MiB;

/**
 * `cdp_url` connections one browser accepts, whatever addresses they come from (the HTTP
 * server's cap counts per client, and many clients may share one browser).
 */
export const CDP_MAX_CLIENTS_PER_BROWSER = 64;

/**
 * Bytes of commands the server has accepted from one relay client and not yet written into
 * Chromium's pipe (they wait behind what Chromium has not read yet). Past `CDP_PIPE_WINDOW_BYTES`
 * its socket is no longer read; past this bound anyway (frames already received) it is closed
 * (1008). One largest command and 32 MiB more: Playwright's `setInputFiles` of a 50 MB buffer
 * passes with room for what follows it; a client that sends faster than Chromium reads does not
 * (one client's 3,000 commands of 1000 KiB took the server to 5.4 GB, issue 35).
 */
export const CDP_MAX_INBOUND_BYTES_PER_CLIENT = CDP_MAX_COMMAND_BYTES + 32 * MiB;

/**
 * Bytes all relay clients of one browser, and all relay clients of the server, may have waiting
 * for Chromium's pipe together: past either, the server stops reading those clients' sockets until
 * half of it has been written (nobody is closed for others' load). Two and four largest commands.
 */
export const CDP_MAX_INBOUND_BYTES_PER_BROWSER = 256 * MiB;
export const CDP_MAX_INBOUND_BYTES_TOTAL = 512 * MiB;

/**
 * Bytes of long frames the relay's clients are still sending, all clients of the server together
 * (each frame is held until its last byte came, up to `CDP_MAX_COMMAND_BYTES`): six connections
 * each sending 95 MiB of a frame and never its end held 570 MiB, 64 would hold 6 GiB. A frame
 * that would pass the total waits, not read, until others are handed over (its client is closed,
 * 1008, after a minute of that). Five largest frames.
 */
export const CDP_MAX_ASSEMBLING_BYTES_TOTAL = 512 * MiB;

/**
 * Bytes written into Chromium's pipe that Chromium has not yet shown it has taken in: its pipe
 * reader hands every message, copied, to the browser's main thread without any bound, so what
 * the server writes ahead of that thread piles up in Chromium's memory. Past this window the
 * server writes a cheap command of its own and writes on only once its reply has come (every
 * message before it was then dispatched). A larger message goes alone.
 */
export const CDP_PIPE_WINDOW_BYTES = 16 * MiB;

/**
 * How long Chromium may leave that command unanswered, while the instance is not paused, before
 * its pipe is failed and the browser treated as crashed (a deaf browser answered every tool call
 * with a 500 and stayed `running`, issue 35). Parsing the largest command takes Chromium about a
 * second; the server's own commands give up after 15 s.
 */
export const CDP_PIPE_DEAF_MS = 20_000;

/** Bytes the server holds for a relay client that is not connected yet; past them it is dropped. */
export const CDP_MAX_QUEUED_BYTES = 64 * MiB;

/**
 * What the server decodes itself is bounded far below what it only passes on: a message is
 * routed without decoding whatever its size, but JSON decoded into objects takes many times its
 * length in memory. Messages that change ownership (`Target.attachedToTarget`, attach replies)
 * are a few hundred bytes.
 */
export const CDP_MAX_DECODED_BYTES = 1 * MiB;

/**
 * A client's command larger than this, of the shape Playwright and Puppeteer write and of a
 * method whose params the relay does not read, is located rather than decoded (command.ts).
 * Decoding a 1000 KiB command and writing it anew took 18-27 ms of the main thread; locating it
 * takes well under a millisecond, so a client sending many commands just under
 * `CDP_MAX_DECODED_BYTES` no longer stalls everyone else (issue 35).
 */
export const CDP_LOCATE_ABOVE_BYTES = 64 * 1024;

/**
 * Events for the server's own connection (its screencasts' frames are the largest) and replies
 * to its own commands (screenshots, storage), past which an event is dropped and a reply turned
 * into an error, never decoded.
 */
export const CDP_MAX_ROOT_EVENT_BYTES = 16 * MiB;
export const CDP_MAX_ROOT_REPLY_BYTES = 64 * MiB;
