/**
 * JSON from a peer that may be hostile, decoded only when cheap. A byte bound alone does not do:
 * `[{},{},…]` decodes into one object per three bytes, so 64 MiB of it is 22 million objects,
 * gigabytes of heap and seconds of a blocked event loop. Objects and arrays are counted first,
 * stopping at the bound, in native `indexOf` steps; nesting, for values something walks
 * recursively, is bounded too.
 */

/** Objects and arrays one decoded message may hold, by default. */
export const MAX_JSON_CONTAINERS = 200_000;

/** A message whose decoding would cost more than allowed; nothing was decoded. */
export class JsonTooCostly extends Error {
  override name = 'JsonTooCostly';
}

/** Whether `text` holds more than `max` `{` and `[` (strings included: an upper bound). */
export function containersOver(text: string, max: number): boolean {
  let count = 0;
  for (const open of ['{', '[']) {
    for (let at = text.indexOf(open); at !== -1; at = text.indexOf(open, at + 1)) {
      if (++count > max) return true;
    }
  }
  return false;
}

/**
 * `JSON.parse(text)`, refused with `JsonTooCostly` past `maxContainers` objects and arrays, or
 * past `maxDepth` levels of nesting when given.
 */
export function parseBounded(
  text: string,
  maxContainers = MAX_JSON_CONTAINERS,
  maxDepth?: number,
): unknown {
  if (containersOver(text, maxContainers)) {
    throw new JsonTooCostly(
      `more than ${maxContainers} objects and arrays in ${text.length} characters`,
    );
  }
  if (maxDepth !== undefined && jsonNestingOffset(text, maxDepth) >= 0) {
    throw new JsonTooCostly(`nested deeper than ${maxDepth} levels`);
  }
  return JSON.parse(text);
}

/**
 * The offset of the bracket that opens nesting level `maxDepth + 1` in `text`, or -1 when the
 * text never nests that deep. Brackets inside strings do not count. Linear, no recursion.
 */
export function jsonNestingOffset(text: string, maxDepth: number): number {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // a string's characters are skipped in native steps: its end is the next quote that an
      // even number of backslashes (none included) comes before
      for (;;) {
        const end = text.indexOf('"', i + 1);
        if (end === -1) return -1;
        let slashes = 0;
        while (text.charCodeAt(end - 1 - slashes) === 0x5c /* \ */) slashes++;
        i = end;
        if (slashes % 2 === 0) break;
      }
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > maxDepth) return i;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return -1;
}
