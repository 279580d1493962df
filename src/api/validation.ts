/**
 * Turns zod issues into FastAPI/pydantic v2 shaped validation errors (COMPAT.md "Common"), so
 * that code written for the original service reads our 422s unchanged.
 */
import type { z } from 'zod';

export type Location = 'body' | 'query' | 'path';

export interface ValidationErrorItem {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

const TYPE_NAMES: Record<string, [type: string, msg: string]> = {
  string: ['string_type', 'Input should be a valid string'],
  number: ['float_type', 'Input should be a valid number'],
  int: ['int_type', 'Input should be a valid integer'],
  boolean: ['bool_type', 'Input should be a valid boolean'],
  array: ['list_type', 'Input should be a valid list'],
  tuple: ['list_type', 'Input should be a valid list'],
  record: ['dict_type', 'Input should be a valid dictionary'],
  object: ['dict_type', 'Input should be a valid dictionary'],
};

/** Marks zod's "expected number" issues that come from an integer schema (see `wireParse`). */
const INT_TAG = 'burrow:int';

/**
 * `schema.safeParse(value)` with an error map that remembers which number issues came from an
 * integer schema, so that `validationDetail` can say `int_type` as pydantic does.
 */
export function wireParse<S extends z.ZodType>(
  schema: S,
  value: unknown,
): z.ZodSafeParseResult<z.output<S>> {
  return schema.safeParse(value, {
    error: (iss) => {
      const def = (iss.inst as { _zod?: { def?: { format?: string } } } | undefined)?._zod?.def;
      return iss.code === 'invalid_type' && def?.format === 'safeint' ? INT_TAG : undefined;
    },
  });
}

const stripSlashes = (pattern: unknown) => String(pattern ?? '').replace(/^\/(.*)\/[a-z]*$/s, '$1');

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = root;
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

function quoteList(values: readonly unknown[]): string {
  const q = values.map((v) => `'${String(v)}'`);
  if (q.length <= 1) return q.join('');
  return `${q.slice(0, -1).join(', ')} or ${q[q.length - 1]}`;
}

function one(issue: z.core.$ZodIssue, where: Location, input: unknown): ValidationErrorItem {
  const path = issue.path.map((p) => (typeof p === 'number' ? p : String(p)));
  const loc = [where, ...path];
  const value = valueAt(input, issue.path);
  const base = (type: string, msg: string, ctx?: Record<string, unknown>): ValidationErrorItem => {
    const item: ValidationErrorItem = { loc, msg, type };
    if (value !== undefined) item.input = value;
    if (ctx) item.ctx = ctx;
    return item;
  };
  // An absent field is pydantic's `missing`, whatever zod's check on it was.
  if (value === undefined && issue.path.length > 0 && issue.code !== 'invalid_union') {
    const parent = valueAt(input, issue.path.slice(0, -1));
    const key = issue.path[issue.path.length - 1]!;
    if (parent !== null && typeof parent === 'object' && !(key in parent)) {
      return base('missing', 'Field required');
    }
  }
  switch (issue.code) {
    case 'invalid_type': {
      if (value === undefined) return base('missing', 'Field required');
      if (issue.path.length === 0 && issue.expected === 'object') {
        return base(
          'model_attributes_type',
          'Input should be a valid dictionary or object to extract fields from',
        );
      }
      const expected = issue.message === INT_TAG ? 'int' : issue.expected;
      if (expected === 'int' && typeof value === 'number' && Number.isFinite(value)) {
        return base(
          'int_from_float',
          'Input should be a valid integer, got a number with a fractional part',
        );
      }
      const [type, msg] = TYPE_NAMES[expected] ?? [
        'type_error',
        `Input should be a valid ${expected}`,
      ];
      return base(type, msg);
    }
    case 'invalid_value':
      if (issue.values.length === 1) {
        return base('literal_error', `Input should be ${quoteList(issue.values)}`, {
          expected: quoteList(issue.values),
        });
      }
      return base('enum', `Input should be ${quoteList(issue.values)}`, {
        expected: quoteList(issue.values),
      });
    case 'too_small':
      if (issue.origin === 'array' || issue.origin === 'set') {
        return base(
          'too_short',
          `List should have at least ${String(issue.minimum)} item${Number(issue.minimum) === 1 ? '' : 's'} after validation, not ${Array.isArray(value) ? value.length : 0}`,
          {
            field_type: 'List',
            min_length: issue.minimum,
          },
        );
      }
      if (issue.origin === 'string') {
        return base(
          'string_too_short',
          `String should have at least ${String(issue.minimum)} character${Number(issue.minimum) === 1 ? '' : 's'}`,
          {
            min_length: issue.minimum,
          },
        );
      }
      return issue.inclusive === false
        ? base('greater_than', `Input should be greater than ${String(issue.minimum)}`, {
            gt: issue.minimum,
          })
        : base(
            'greater_than_equal',
            `Input should be greater than or equal to ${String(issue.minimum)}`,
            { ge: issue.minimum },
          );
    case 'too_big':
      if (issue.origin === 'array' || issue.origin === 'set') {
        return base(
          'too_long',
          `List should have at most ${String(issue.maximum)} item${Number(issue.maximum) === 1 ? '' : 's'} after validation, not ${Array.isArray(value) ? value.length : 0}`,
          {
            field_type: 'List',
            max_length: issue.maximum,
          },
        );
      }
      if (issue.origin === 'string') {
        return base(
          'string_too_long',
          `String should have at most ${String(issue.maximum)} characters`,
          {
            max_length: issue.maximum,
          },
        );
      }
      return issue.inclusive === false
        ? base('less_than', `Input should be less than ${String(issue.maximum)}`, {
            lt: issue.maximum,
          })
        : base(
            'less_than_equal',
            `Input should be less than or equal to ${String(issue.maximum)}`,
            { le: issue.maximum },
          );
    case 'invalid_union': {
      const disc = (issue as { discriminator?: string }).discriminator;
      const options = (issue as { options?: unknown[] }).options;
      if (disc) {
        const parentLoc = loc.slice(0, -1);
        const parent = valueAt(input, issue.path.slice(0, -1));
        const item: ValidationErrorItem =
          value === undefined
            ? {
                loc: parentLoc,
                msg: `Unable to extract tag using discriminator '${disc}'`,
                type: 'union_tag_not_found',
                ctx: { discriminator: `'${disc}'` },
              }
            : {
                loc: parentLoc,
                msg: `Input tag '${String(value)}' found using '${disc}' does not match any of the expected tags: ${(options ?? []).map((o) => `'${String(o)}'`).join(', ')}`,
                type: 'union_tag_invalid',
                ctx: { discriminator: `'${disc}'`, tag: String(value) },
              };
        if (parent !== undefined) item.input = parent;
        return item;
      }
      return base('union_error', 'Input does not match any allowed shape');
    }
    case 'invalid_key': {
      // pydantic reports a bad dict key at `[..., key, "[key]"]` with the key as input.
      const inner = issue.issues[0] as { code?: string; pattern?: string } | undefined;
      const item: ValidationErrorItem =
        inner?.code === 'invalid_format'
          ? {
              loc: [...loc, '[key]'],
              msg: `String should match pattern '${stripSlashes(inner.pattern)}'`,
              type: 'string_pattern_mismatch',
            }
          : { loc: [...loc, '[key]'], msg: 'Invalid key', type: 'value_error' };
      item.input = issue.path[issue.path.length - 1];
      return item;
    }
    case 'invalid_format':
    case 'custom':
    default:
      if (issue.code === 'invalid_format' && issue.format === 'regex') {
        return base(
          'string_pattern_mismatch',
          `String should match pattern '${stripSlashes((issue as { pattern?: string }).pattern)}'`,
        );
      }
      return base('value_error', `Value error, ${issue.message}`);
  }
}

/** FastAPI-shaped `detail` items for a failed zod parse of the input found at `where`. */
export function validationDetail(
  error: z.ZodError,
  where: Location,
  input: unknown,
): ValidationErrorItem[] {
  const items: ValidationErrorItem[] = [];
  for (const issue of error.issues) {
    // A record with a bad key reports under the key; pydantic reports `[key, "[key]"]`.
    items.push(one(issue, where, input));
  }
  return items;
}

/**
 * The offset of the first JSON syntax error in `text` (what pydantic reports as the second loc
 * item of `json_invalid`), or -1 if the text is valid JSON. V8's messages do not always carry a
 * position, so this scans the text itself.
 */
export function jsonErrorOffset(text: string): number {
  let i = 0;
  const n = text.length;
  const ws = () => {
    while (i < n && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r'))
      i++;
  };
  const fail = (): never => {
    throw i;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        str();
        ws();
        if (text[i] !== ':') fail();
        i++;
        value();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        fail();
      }
    } else if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (;;) {
        value();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        fail();
      }
    } else if (c === '"') {
      str();
    } else if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
      if (!m) fail();
      i += m![0].length;
    } else {
      for (const lit of ['true', 'false', 'null']) {
        if (text.startsWith(lit, i)) {
          i += lit.length;
          return;
        }
      }
      fail();
    }
  };
  const str = () => {
    const start = i;
    i++;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return;
      }
      if (c === 0x5c) {
        const e = text[i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
            i += 1;
            fail();
          }
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else fail();
        continue;
      }
      if (c < 0x20) fail();
      i++;
    }
    i = start; // an unterminated string is reported where it opens, as Python's json does
    fail();
  };
  try {
    value();
    ws();
    if (i < n) fail();
    return -1;
  } catch (offset) {
    if (typeof offset === 'number') return offset;
    throw offset;
  }
}
