/**
 * Line and occurrence work on a text the edit and file tools hold (up to `MAX_TEXT_BYTES`), done
 * in the main thread's shared slices (internal/cpu-share.ts). The instance chooses the text: 31
 * MiB of newlines is 32 million lines, and splitting it into one string a line held `/livez` for
 * seconds and took the server past 5 GB. Here no array of lines is made; native `indexOf` steps,
 * a bounded number a slice, find what an edit needs (a count, a line's offset, a range of lines).
 */
import { inSlices } from '../../internal/cpu-share.js';

/** `indexOf` calls a step makes at most (a step stays well under a millisecond). */
const STEP = 4096;

/** Calls `found(at)` for each occurrence of `needle` from `from` until it returns false. */
function* scan(
  text: string,
  needle: string,
  from: number,
  found: (at: number) => boolean,
): Generator<void, void> {
  let at = text.indexOf(needle, from);
  for (let n = 0; at !== -1; n++) {
    if (!found(at)) return;
    at = text.indexOf(needle, at + needle.length);
    if (n % STEP === STEP - 1) yield;
  }
}

/** Python's `str.count` (an empty needle occurs len+1 times), in slices. */
export function countSliced(text: string, needle: string): Promise<number> {
  if (needle === '') return Promise.resolve(text.length + 1);
  let n = 0;
  return inSlices(
    (function* () {
      yield* scan(text, needle, 0, () => ++n > 0);
      return n;
    })(),
  );
}

/** Offset where line `n` (0-based) starts, or -1 when the text has fewer than n newlines. */
export async function lineStart(text: string, n: number): Promise<number> {
  return (await lineStarts(text, [n]))[0]!;
}

/** Offsets where lines `ns` (0-based, ascending) start, -1 past the end: one pass. */
export function lineStarts(text: string, ns: readonly number[]): Promise<number[]> {
  const starts = ns.map(() => -1);
  let i = 0;
  while (i < ns.length && ns[i]! <= 0) starts[i++] = 0;
  let line = 0;
  return inSlices(
    (function* () {
      if (i < ns.length)
        yield* scan(text, '\n', 0, (at) => {
          line++;
          while (i < ns.length && ns[i] === line) starts[i++] = at + 1;
          return i < ns.length;
        });
      return starts;
    })(),
  );
}

/** `text.split('\n').slice(a, b).join('\n')` (0-based, `b` past the end: to the end). */
export async function lineSlice(text: string, a: number, b: number): Promise<string> {
  const start = await lineStart(text, a);
  if (start < 0 || b <= a) return '';
  const next = await lineStart(text.slice(start), b - a);
  return next < 0 ? text.slice(start) : text.slice(start, start + next - 1);
}

/** `text.split(needle).join(replacement)` (a non-empty needle), in slices. */
export function replaceAllSliced(
  text: string,
  needle: string,
  replacement: string,
): Promise<string> {
  const done: string[] = [];
  let parts: string[] = [];
  let last = 0;
  return inSlices(
    (function* () {
      yield* scan(text, needle, 0, (at) => {
        parts.push(text.slice(last, at), replacement);
        last = at + needle.length;
        if (parts.length >= 2 * STEP) {
          done.push(parts.join(''));
          parts = [];
        }
        return true;
      });
      parts.push(text.slice(last));
      done.push(parts.join(''));
      yield;
      return done.join('');
    })(),
  );
}

/**
 * The 1-based numbers of the lines holding `needle` (one without a newline), the first `max`,
 * and how many lines hold it.
 */
export function linesHolding(
  text: string,
  needle: string,
  max: number,
): Promise<{ lines: number[]; total: number }> {
  const lines: number[] = [];
  let total = 0;
  const hold = (line: number) => {
    total++;
    if (lines.length < max) lines.push(line);
  };
  let line = 1;
  let occ = text.indexOf(needle);
  return inSlices(
    (function* () {
      yield* scan(text, '\n', 0, (nl) => {
        if (occ === -1) return false;
        if (occ <= nl) {
          hold(line);
          occ = text.indexOf(needle, nl + 1);
        }
        line++;
        return true;
      });
      if (occ !== -1) hold(line);
      return { lines, total };
    })(),
  );
}

/** Bytes (or characters) decoded or encoded a step: well under a millisecond each. */
const PIECE = 256 * 1024;

/** Strict UTF-8 of `data` as a string, decoded a piece a step; undefined if it is not UTF-8. */
export function decodeSliced(data: Uint8Array): Promise<string | undefined> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return inSlices(
    (function* () {
      const parts: string[] = [];
      try {
        for (let at = 0; at < data.length; at += PIECE) {
          parts.push(decoder.decode(data.subarray(at, at + PIECE), { stream: true }));
          yield;
        }
        parts.push(decoder.decode());
      } catch {
        return undefined;
      }
      return parts.join('');
    })(),
  );
}

/** `Buffer.from(text, 'utf8')`, encoded a piece a step (a surrogate pair kept in one piece). */
export function encodeSliced(text: string): Promise<Buffer> {
  return inSlices(
    (function* () {
      const parts: Buffer[] = [];
      for (let at = 0; at < text.length;) {
        let end = Math.min(text.length, at + PIECE);
        const last = text.charCodeAt(end - 1);
        if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
        parts.push(Buffer.from(text.slice(at, end), 'utf8'));
        at = end;
        yield;
      }
      return Buffer.concat(parts);
    })(),
  );
}
