/**
 * A relay client's frames unmasked as their bytes arrive, not in one pass when a frame is whole.
 *
 * Every frame a WebSocket client sends is masked (RFC 6455 §5.3). `ws`, without its optional
 * native `bufferutil` (burrow does not ship it), unmasks a frame in one JavaScript loop over its
 * bytes once all of them have arrived: a `cdp_url` client's 96 MiB frame held the main thread
 * 0.5–1.4 s on a loaded machine, and a client sending such frames without pause stalled every
 * other client of the server for as long (issue 35). Here each chunk the socket reads is unmasked
 * in place, a word at a time, before `ws` sees it, and each frame's masking key is overwritten
 * with zeros, which `ws` then skips: the same work, in slices of one socket read.
 *
 * Long payloads are also assembled here as they arrive (`frameReader`), so that `ws` need not
 * join them in one step when they are whole, and what they hold is charged to one total for the
 * server before it is held (`CDP_MAX_ASSEMBLING_BYTES_TOTAL`).
 */
import { endianness } from 'node:os';
import { CDP_MAX_ASSEMBLING_BYTES_TOTAL } from '../../api/cdp-limits.js';
import { ByteBudget } from '../../internal/byte-budget.js';
import { bytesPerTurn } from '../../internal/cpu-share.js';

const LITTLE_ENDIAN = endianness() === 'LE';

/**
 * Unmasks `buf[start, end)` in place with `key`, whose byte `phase` applies to `buf[start]`;
 * returns the phase for the byte after `end`.
 */
function unmask(buf: Buffer, start: number, end: number, key: Uint8Array, phase: number): number {
  let i = start;
  let p = phase;
  while (i < end && (!LITTLE_ENDIAN || (buf.byteOffset + i) % 4 !== 0)) {
    buf[i++]! ^= key[p]!;
    p = (p + 1) & 3;
  }
  const words = (end - i) >>> 2;
  if (words > 0) {
    const word =
      (key[p]! |
        (key[(p + 1) & 3]! << 8) |
        (key[(p + 2) & 3]! << 16) |
        (key[(p + 3) & 3]! << 24)) >>>
      0;
    const view = new Uint32Array(buf.buffer, buf.byteOffset + i, words);
    for (let w = 0; w < words; w++) view[w]! ^= word;
    i += words * 4;
  }
  while (i < end) {
    buf[i++]! ^= key[p]!;
    p = (p + 1) & 3;
  }
  return p;
}

/** How `ws` is fed: its WebSocket's receiver, a Writable the socket's bytes are written to. */
interface Fed {
  _receiver?: { write(chunk: Buffer): boolean; writableNeedDrain?: boolean };
  _socket?: {
    once(event: 'close', listener: () => void): unknown;
    resume(): unknown;
    isPaused?(): boolean;
  };
  isPaused?: boolean;
  close?(code: number, reason: string): void;
  terminate?(): void;
}

/** How long a long frame waits for room in the server's total before its client is closed. */
export const ASSEMBLING_WAIT_MS = 60_000;

/** Why a client whose long frame found no room in the server's total in time is closed. */
export const ASSEMBLING_CLOSE = {
  code: 1008,
  reason: `the server was receiving ${CDP_MAX_ASSEMBLING_BYTES_TOTAL / 2 ** 20} MiB of other clients' long frames for ${ASSEMBLING_WAIT_MS / 1000} s`,
};

/**
 * A connection holding part of the total must send on: at least `ASSEMBLING_MIN_PROGRESS` bytes
 * in each `ASSEMBLING_STALL_MS` while the server reads it (a 96 MiB frame at 50 KiB/s), else it is
 * closed and what it held goes to the frames waiting. Without it, the headers of six 96 MiB
 * frames (84 bytes) held the whole total for as long as their sender liked, and every other
 * client's long commands waited their 60 s and were refused.
 */
export const ASSEMBLING_STALL_MS = 20_000;
export const ASSEMBLING_MIN_PROGRESS = 1024 * 1024;

/**
 * Why a client is closed whose long frame others waited for through a whole window: once a frame
 * waits for the total, each frame held then must be finished within `ASSEMBLING_STALL_MS` (a
 * 96 MiB frame at about 5 MiB/s), whatever the minimum says. The minimum alone let six frames
 * sent at 1 MiB in each 18 s hold the whole total for half an hour while every other client's long
 * commands were refused after their 60 s (attack4's A1); now a waiting frame is let in within
 * two windows.
 */
export const HOLDING_CLOSE = {
  code: 1008,
  reason: `others waited for the total while this client's long message was not finished in ${ASSEMBLING_STALL_MS / 1000} s`,
};

/** Why a client that holds part of the total and does not send on is closed. */
export const STALLED_CLOSE = {
  code: 1008,
  reason: `a long message was not sent on: under ${ASSEMBLING_MIN_PROGRESS / 2 ** 20} MiB in ${ASSEMBLING_STALL_MS / 1000} s`,
};

/**
 * Bytes of long payloads being assembled, every connection of the server together: one budget,
 * first come first served (a frame that does not fit waits its turn).
 */
const assembling = new ByteBudget(CDP_MAX_ASSEMBLING_BYTES_TOTAL);
/** Bytes being assembled now (tests). */
export const assemblingBytes = () => assembling.used;

/**
 * Feeds `ws`'s receiver the frames a client sends, unmasked as they arrive, each payload of at
 * least `ASSEMBLE_FROM` bytes assembled here and handed over whole, within the server's total
 * (`CDP_MAX_ASSEMBLING_BYTES_TOTAL`): a frame that does not fit waits, its socket not read, for
 * its turn in that budget, and its client is closed (1008) after `ASSEMBLING_WAIT_MS`. Call
 * right after `ws` took the socket (`handleUpgrade`'s callback), before any data flowed. Relies
 * on `ws`'s receiver (`_receiver`, a Writable since ws 1.x); throws when it is not there, so a
 * `ws` that changed fails the relay's tests instead of silently costing the main thread again.
 */
export function unmaskAsReceived(ws: object, maxPayload: number): void {
  const fed = ws as Fed;
  const receiver = fed._receiver;
  if (typeof receiver?.write !== 'function') {
    throw new Error('ws: no receiver to feed (a ws version the relay was not written for)');
  }
  const write = receiver.write.bind(receiver);
  /** What this connection holds of the budget, in the order it took it (and gives it back). */
  const held: { bytes: number; giveBack: () => void }[] = [];
  const gone = new AbortController();
  let closed = false;
  /** Bytes read in this window while the connection held part of the total. */
  let progress = 0;
  /** The frame this connection held first when the last window ended with others waiting. */
  let heldWhileOthersWaited: object | undefined;
  let stallClock: NodeJS.Timeout | undefined;
  const stalled = () => {
    if (held.length === 0 || closed) {
      clearInterval(stallClock);
      stallClock = undefined;
      return;
    }
    const sent = progress;
    progress = 0;
    // others wait: the frame held when they already did a window ago must be finished by now
    const othersWait = assembling.waiting > 0;
    const overdue = othersWait && heldWhileOthersWaited === held[0];
    heldWhileOthersWaited = othersWait ? held[0] : undefined;
    // not read, by the relay's or ws's choice or while a frame waits: not the client's doing
    const unread = fed.isPaused || fed._socket?.isPaused?.() || reader.waiting > 0;
    if (unread || (sent >= ASSEMBLING_MIN_PROGRESS && !overdue)) return;
    closed = true;
    clearInterval(stallClock);
    stallClock = undefined;
    const why = overdue ? HOLDING_CLOSE : STALLED_CLOSE;
    fed.close?.(why.code, why.reason);
    // the close frame goes out, then the socket: what it held is given back when it closes
    setTimeout(() => fed.terminate?.(), 1000).unref();
  };
  const hold = (bytes: number, giveBack: () => void) => {
    held.push({ bytes, giveBack });
    stallClock ??= setInterval(stalled, ASSEMBLING_STALL_MS).unref();
  };
  const reader = frameReader(maxPayload, {
    admit: (bytes) => {
      const giveBack = assembling.tryTake(bytes);
      if (giveBack) hold(bytes, giveBack);
      return giveBack !== undefined;
    },
    done: (bytes) => {
      for (let left = bytes; left > 0 && held.length > 0;) {
        const first = held.shift()!;
        left -= first.bytes;
        first.giveBack();
      }
    },
  });
  const writeAll = (pieces: Buffer[]) => {
    let ok = !receiver.writableNeedDrain;
    for (const piece of pieces) ok = write(piece);
    return ok;
  };
  const wait = (bytes: number) => {
    const timeout = () => new Error('no room in time');
    assembling.take(bytes, ASSEMBLING_WAIT_MS, timeout, gone.signal).then(
      (giveBack) => {
        // room granted in the tick its socket closed: the close has let go of what it held
        if (closed) return giveBack();
        hold(bytes, giveBack);
        writeAll(reader.admitted());
        // what came after it may hold a frame that does not fit either: it waits its turn too
        if (reader.waiting > 0) return wait(reader.waiting);
        if (!fed.isPaused) fed._socket?.resume(); // unless the relay itself stopped reading it
      },
      () => {
        if (closed) return;
        closed = true;
        fed.close?.(ASSEMBLING_CLOSE.code, ASSEMBLING_CLOSE.reason);
      },
    );
  };
  fed._socket?.once('close', () => {
    closed = true;
    clearInterval(stallClock);
    gone.abort();
    for (const h of held.splice(0)) h.giveBack(); // a frame the client never finished
  });
  /** Reads the socket again, unless the relay, `ws` or a waiting frame keeps it unread. */
  let goingOn = false;
  const goOn = () => {
    goingOn = false;
    if (closed || fed.isPaused || reader.waiting > 0 || receiver.writableNeedDrain) return;
    fed._socket?.resume();
  };
  receiver.write = (chunk: Buffer) => {
    if (closed) return true; // closing: what still comes is dropped
    if (held.length > 0) progress += chunk.length;
    const wasWaiting = reader.waiting > 0;
    const ok = writeAll(reader.read(chunk));
    if (reader.waiting === 0) {
      // past the main thread's bytes for this turn, read on in the next (internal/cpu-share.ts)
      if (bytesPerTurn.spend(chunk.length)) return ok;
      if (!goingOn) bytesPerTurn.nextTurn(goOn); // ws stops reading the socket until then
      goingOn = true;
      return false;
    }
    if (!wasWaiting) wait(reader.waiting);
    return false; // ws stops reading the socket until the frame is admitted
  };
}

/** What a reader asks before it holds a long payload, and tells once it handed it over. */
export interface AssemblyBudget {
  /** Whether `bytes` may be held for a payload being assembled (they are then counted). */
  admit(bytes: number): boolean;
  /** A payload of `bytes` was handed over whole: no longer held here. */
  done(bytes: number): void;
}

/** One connection's frames as `frameReader` follows them. */
export interface FrameReader {
  /** What to hand `ws` for `chunk`, in order (nothing while `waiting`: it is kept). */
  read(chunk: Buffer): Buffer[];
  /** The charge of a frame its budget did not admit, which waits (0: none waits). */
  readonly waiting: number;
  /** That charge is now held for it (taken by the caller): what to hand `ws` from there on. */
  admitted(): Buffer[];
}

/**
 * Payloads at least this long are assembled into one buffer as they arrive. `ws` joins a
 * frame's chunks only once all have come, into memory it has just allocated: on this machine
 * the first touch of 90 MiB of fresh pages alone took about 0.5 s of the main thread. Filled a
 * socket read at a time, the same pages are touched a few at a time, and `ws` takes the
 * assembled payload as its one chunk without copying it.
 */
const ASSEMBLE_FROM = 1024 * 1024;

/**
 * What a piece of a message sent in pieces is charged at least: what keeping one costs beside its
 * bytes (its buffer, `ws`'s reference to it), so that a message of many 1-byte pieces is bounded
 * by the total as well as one of a few long ones.
 */
export const PIECE_CHARGE = 1024;

/**
 * A reader of one connection's frames: given each chunk the socket read, returns what to hand
 * `ws`, in order. Headers and short payloads pass as they came (unmasked in place, the key
 * zeroed, which `ws` then skips); a long payload is copied, unmasked, into a buffer of its
 * declared length and handed over once full. The header is read only as far as needed to follow
 * the frames (lengths and key): `ws` still reads and checks everything itself (opcodes, lengths
 * against `maxPayload`, UTF-8). A frame longer than `maxPayload` is passed on as it came, and so
 * is everything after it: `ws` closes the connection (1009) on its header.
 */
export function frameReader(
  maxPayload: number,
  budget: AssemblyBudget = { admit: () => true, done: () => {} },
): FrameReader {
  /** Bytes of the current frame's header seen so far (up to 14). */
  const header = new Uint8Array(14);
  let headerSeen = 0;
  /** Where in the header the key starts, and the header's length, once known. */
  let keyAt = 0;
  let headerLength = 2;
  const key = new Uint8Array(4);
  /** Payload bytes of the current frame still to come, and the key's phase for the next one. */
  let payloadLeft = 0;
  let phase = 0;
  /** The long payload being assembled, and how much of it has come. */
  let assembling: Buffer | undefined;
  let filled = 0;
  let givenUp = false;
  /**
   * Bytes charged to the budget for the message being received in pieces (`ws` keeps each piece
   * until the last), and what to give back once the current frame's payload has been handed on.
   */
  let messageHeld = 0;
  let releaseAtEnd = 0;
  /** The charge of a frame waiting for the budget, what starts it once admitted, what came after. */
  let blocked = 0;
  let startBlocked: (() => void) | undefined;
  const kept: Buffer[] = [];

  /** The current frame's payload was all handed on: what it held is given back. */
  const ended = () => {
    if (releaseAtEnd === 0) return;
    const bytes = releaseAtEnd;
    releaseAtEnd = 0;
    budget.done(bytes);
  };
  /** A frame of `length` bytes, admitted with `charge` bytes, starts. */
  const start = (length: number, charge: number, piece: boolean, last: boolean) => {
    if (piece) {
      messageHeld += charge;
      if (last) [releaseAtEnd, messageHeld] = [messageHeld, 0];
    } else {
      releaseAtEnd = charge;
    }
    // a piece is copied out of the read it came in, however short: `ws` keeps each piece until
    // the message's last, and a view would keep the whole read (a 1-byte piece behind 63 KiB
    // of pongs kept 64 KiB)
    if (length >= ASSEMBLE_FROM || (piece && length > 0)) {
      assembling = Buffer.allocUnsafeSlow(length);
      filled = 0;
    }
    if (length === 0) ended();
  };

  const read = (chunk: Buffer): Buffer[] => {
    if (givenUp) return [chunk];
    if (blocked > 0) {
      kept.push(chunk);
      return [];
    }
    const out: Buffer[] = [];
    /** Where the run of bytes passed on as they came starts in `chunk`. */
    let passFrom = 0;
    let i = 0;
    while (i < chunk.length) {
      if (payloadLeft > 0) {
        const end = Math.min(chunk.length, i + payloadLeft);
        if (assembling) {
          if (i > passFrom) out.push(chunk.subarray(passFrom, i));
          chunk.copy(assembling, filled, i, end);
          phase = unmask(assembling, filled, filled + end - i, key, phase);
          filled += end - i;
          passFrom = end;
          if (filled === assembling.length) {
            out.push(assembling);
            assembling = undefined;
          }
        } else {
          phase = unmask(chunk, i, end, key, phase);
        }
        payloadLeft -= end - i;
        i = end;
        if (payloadLeft === 0) ended();
        continue;
      }
      // a header byte
      const at = headerSeen++;
      header[at] = chunk[i]!;
      if (at >= keyAt && keyAt > 0 && at < keyAt + 4) {
        key[at - keyAt] = chunk[i]!;
        chunk[i] = 0; // ws skips a frame whose key is zero
      }
      i++;
      if (headerSeen === 2) {
        if ((header[1]! & 0x80) === 0) {
          // unmasked: ws closes the connection (1002); nothing more to follow
          givenUp = true;
          out.push(chunk.subarray(passFrom));
          return out;
        }
        const len7 = header[1]! & 0x7f;
        keyAt = len7 === 126 ? 4 : len7 === 127 ? 10 : 2;
        headerLength = keyAt + 4;
      }
      if (headerSeen === headerLength) {
        const len7 = header[1]! & 0x7f;
        let length = len7;
        if (len7 === 126) length = (header[2]! << 8) | header[3]!;
        if (len7 === 127) {
          const high =
            ((header[2]! << 24) | (header[3]! << 16) | (header[4]! << 8) | header[5]!) >>> 0;
          const low =
            ((header[6]! << 24) | (header[7]! << 16) | (header[8]! << 8) | header[9]!) >>> 0;
          length = high * 2 ** 32 + low;
        }
        if (length > maxPayload) {
          givenUp = true;
          out.push(chunk.subarray(passFrom));
          return out;
        }
        payloadLeft = length;
        phase = 0;
        headerSeen = 0;
        keyAt = 0;
        headerLength = 2;
        // a long frame is held here until whole; the pieces of a message sent in pieces are held
        // by `ws` until its last: either is charged on its header, before it is held
        const opcode = header[0]! & 0x0f;
        const last = (header[0]! & 0x80) !== 0;
        const piece = opcode < 8 && (!last || opcode === 0);
        // a piece kept until the message's last is charged what keeping it costs at least (the
        // last is not kept: \`ws\` joins the message as it comes)
        const cost = piece && !last ? Math.max(length, PIECE_CHARGE) : length;
        const charge = piece || length >= ASSEMBLE_FROM ? cost : 0;
        if (charge > 0 && !budget.admit(charge)) {
          // the header goes on now; the payload waits, and what comes after it, in order
          blocked = charge;
          startBlocked = () => start(length, charge, piece, last);
          out.push(chunk.subarray(passFrom, i));
          if (i < chunk.length) kept.push(chunk.subarray(i));
          return out;
        }
        start(length, charge, piece, last);
      }
    }
    if (passFrom < chunk.length) out.push(chunk.subarray(passFrom));
    return out;
  };

  return {
    read,
    get waiting() {
      return blocked;
    },
    admitted() {
      if (blocked === 0) return [];
      blocked = 0;
      startBlocked!();
      startBlocked = undefined;
      return kept.splice(0).flatMap((chunk) => read(chunk));
    },
  };
}
