/**
 * Request bodies as the routes see them: JSON text parsed per route so that malformed input
 * becomes a FastAPI-shaped 422 (`json_invalid` with the offset), never a 500. Nesting is bounded
 * before anything recursive (the offset scanner, zod, the 422's `input`, pino) walks the value:
 * 100 000 `[` must not overflow a stack.
 */
import type { z } from 'zod';
import {
  jsonErrorOffset,
  validationDetail,
  wireParse,
  type Location,
  type ValidationErrorItem,
} from '../../api/index.js';
import { jsonNestingOffset } from '../../internal/json-bounded.js';

export { jsonNestingOffset };

/** Deepest array/object nesting a JSON body may have (pydantic's JSON parser allows 200). */
export const MAX_JSON_DEPTH = 256;

/** A request that failed validation: answered 422 with FastAPI's body. */
export class RequestInvalid extends Error {
  constructor(readonly detail: ValidationErrorItem[]) {
    super('request validation failed');
  }
}

const jsonInvalid = (offset: number, error: string) =>
  new RequestInvalid([
    { loc: ['body', offset], msg: 'JSON decode error', type: 'json_invalid', ctx: { error } },
  ]);

/** The JSON value of a route's body: `{}` when empty, a 422 `json_invalid` when malformed. */
export function parseJsonBody(raw: unknown): unknown {
  if (raw === undefined || raw === null || raw === '') return {};
  if (typeof raw !== 'string') return raw;
  if (raw.trim() === '') return {};
  const deep = jsonNestingOffset(raw, MAX_JSON_DEPTH);
  if (deep >= 0) {
    // A syntax error before the too-deep bracket is reported first, as a parser would meet it.
    // The prefix nests at most MAX_JSON_DEPTH deep, so the scanner's recursion stays bounded.
    const offset = jsonErrorOffset(raw.slice(0, deep));
    if (offset >= 0 && offset < deep) throw jsonInvalid(offset, 'Invalid JSON');
    throw jsonInvalid(deep, `Nesting deeper than ${MAX_JSON_DEPTH} levels`);
  }
  try {
    return JSON.parse(raw);
  } catch {
    throw jsonInvalid(Math.max(0, jsonErrorOffset(raw)), 'Invalid JSON');
  }
}

/** `value` checked against `schema` as the wire sends it; a 422 naming `where` when it fails. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: Location,
): z.output<S> {
  const r = wireParse(schema, value);
  if (!r.success) throw new RequestInvalid(validationDetail(r.error, where, value));
  return r.data;
}
