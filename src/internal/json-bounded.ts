/**
 * JSON from a peer that may be hostile, decoded only when cheap. A byte bound alone does not do:
 * `[{},{},…]` decodes into one object per three bytes, so 64 MiB of it is 22 million objects,
 * gigabytes of heap and seconds of a blocked event loop. Objects and arrays are counted first,
 * stopping at the bound, in native `indexOf` steps.
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

/** `JSON.parse(text)`, refused with `JsonTooCostly` past `maxContainers` objects and arrays. */
export function parseBounded(text: string, maxContainers = MAX_JSON_CONTAINERS): unknown {
  if (containersOver(text, maxContainers)) {
    throw new JsonTooCostly(
      `more than ${maxContainers} objects and arrays in ${text.length} characters`,
    );
  }
  return JSON.parse(text);
}
