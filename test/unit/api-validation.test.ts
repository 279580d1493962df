import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  BashRequest,
  ComputerAction,
  EditRequest,
  EnvSetRequest,
  FileRequest,
  ResumeQuery,
  StartRequest,
  jsonErrorOffset,
  validationDetail,
  wireParse,
  type Location,
} from '../../src/api/index.js';

function detail(schema: z.ZodType, input: unknown, where: Location = 'body') {
  const result = wireParse(schema, input);
  if (result.success) throw new Error(`expected ${JSON.stringify(input)} to fail`);
  return validationDetail(result.error, where, input);
}

describe('validationDetail (FastAPI / pydantic v2 shapes)', () => {
  it('missing field → type "missing", msg "Field required", no input', () => {
    expect(detail(EditRequest, { command: 'view' })).toEqual([
      { loc: ['body', 'path'], msg: 'Field required', type: 'missing' },
    ]);
  });

  it('bad enum → type "enum" listing the values pydantic-style', () => {
    expect(detail(StartRequest, { instance_type: 'mac' })).toEqual([
      {
        loc: ['body', 'instance_type'],
        msg: "Input should be 'ubuntu', 'browser' or 'windows'",
        type: 'enum',
        input: 'mac',
        ctx: { expected: "'ubuntu', 'browser' or 'windows'" },
      },
    ]);
  });

  it('number bounds → greater_than_equal / less_than_equal with ge / le', () => {
    expect(detail(StartRequest, { timeout_hours: 0 })).toEqual([
      {
        loc: ['body', 'timeout_hours'],
        msg: 'Input should be greater than or equal to 0.01',
        type: 'greater_than_equal',
        input: 0,
        ctx: { ge: 0.01 },
      },
    ]);
    expect(detail(StartRequest, { timeout_hours: 25 })).toEqual([
      {
        loc: ['body', 'timeout_hours'],
        msg: 'Input should be less than or equal to 24',
        type: 'less_than_equal',
        input: 25,
        ctx: { le: 24 },
      },
    ]);
  });

  it('wrong types → string_type, bool_type, float_type', () => {
    const items = detail(FileRequest, { command: 1, recursive: 'x' });
    expect(items.map((i) => [i.loc, i.type, i.msg])).toEqual([
      [['body', 'command'], 'string_type', 'Input should be a valid string'],
      [['body', 'recursive'], 'bool_type', 'Input should be a valid boolean'],
    ]);
    expect(detail(StartRequest, { timeout_hours: 'soon' })[0]).toMatchObject({
      type: 'float_type',
      msg: 'Input should be a valid number',
      input: 'soon',
    });
  });

  it('a fractional number for an integer → int_from_float', () => {
    expect(detail(BashRequest, { session: 1.5 })[0]).toMatchObject({
      loc: ['body', 'session'],
      type: 'int_from_float',
      msg: 'Input should be a valid integer, got a number with a fractional part',
    });
  });

  it('a string for an integer → int_type', () => {
    expect(detail(BashRequest, { session: 'one' })[0]).toMatchObject({
      type: 'int_type',
      msg: 'Input should be a valid integer',
    });
  });

  it('list length and item errors carry list indexes in loc', () => {
    expect(detail(StartRequest, { resolution: [1024] })[0]).toMatchObject({
      loc: ['body', 'resolution'],
      type: 'too_short',
    });
    expect(detail(StartRequest, { resolution: [1024, 0] })[0]).toMatchObject({
      loc: ['body', 'resolution', 1],
      type: 'greater_than_equal',
    });
  });

  it('a non-object body → model_attributes_type at loc ["body"]', () => {
    expect(detail(StartRequest, [1])).toEqual([
      {
        loc: ['body'],
        msg: 'Input should be a valid dictionary or object to extract fields from',
        type: 'model_attributes_type',
        input: [1],
      },
    ]);
  });

  it('discriminator: missing tag → union_tag_not_found, unknown tag → union_tag_invalid', () => {
    expect(detail(ComputerAction, { x: 1 })).toEqual([
      {
        loc: ['body'],
        msg: "Unable to extract tag using discriminator 'action'",
        type: 'union_tag_not_found',
        ctx: { discriminator: "'action'" },
        input: { x: 1 },
      },
    ]);
    const [invalid] = detail(ComputerAction, { action: 'fly' });
    expect(invalid).toMatchObject({
      loc: ['body'],
      type: 'union_tag_invalid',
      ctx: { discriminator: "'action'", tag: 'fly' },
      input: { action: 'fly' },
    });
    expect(invalid?.msg).toMatch(
      /^Input tag 'fly' found using 'action' does not match any of the expected tags: 'move_mouse', 'click_mouse', /,
    );
  });

  it('a field error inside a valid tag is located under that field', () => {
    expect(detail(ComputerAction, { action: 'click_mouse', button: 'thumb' })[0]).toMatchObject({
      loc: ['body', 'button'],
      type: 'enum',
    });
  });

  it('query numbers: strings are parsed, garbage is float_type at loc ["query", …]', () => {
    expect(ResumeQuery.parse({ timeout_hours: '2' })).toEqual({ timeout_hours: 2 });
    expect(detail(ResumeQuery, { timeout_hours: 'abc' }, 'query')[0]).toMatchObject({
      loc: ['query', 'timeout_hours'],
      type: 'float_type',
    });
    expect(detail(ResumeQuery, { timeout_hours: '30' }, 'query')[0]).toMatchObject({
      type: 'less_than_equal',
    });
  });
});

describe('jsonErrorOffset (Python json.JSONDecodeError.pos)', () => {
  it.each([
    ['', 0],
    ['   ', 3],
    ['{', 1],
    ['{"a":1,}', 7],
    ['[1,2', 4],
    ['[1,]', 3],
    ['{"a" 1}', 5],
    ['tru', 0],
    ['{"a":1} x', 8],
    ['01', 1],
    ['{"a":"\\x"}', 6],
    ['"\u0001"', 1],
    ["{'a': 1}", 1],
  ])('%j → %i', (text, offset) => {
    expect(jsonErrorOffset(text)).toBe(offset);
  });

  it.each(['{}', '[]', ' null ', '{"a":[1,-2.5e3,true,false,null,"\\u00e9\\n"]}', '"x"', '0'])(
    'valid %j → -1',
    (text) => {
      expect(jsonErrorOffset(text)).toBe(-1);
    },
  );

  it('an unterminated string is reported at its opening quote', () => {
    expect(jsonErrorOffset('{"a":"b')).toBe(5);
  });
});

describe('record keys (pydantic dict keys)', () => {
  it('a bad variable name is reported at [..., key, "[key]"] with the key as input', () => {
    expect(detail(EnvSetRequest, { variables: { '1a': 'x' } })[0]).toEqual({
      loc: ['body', 'variables', '1a', '[key]'],
      msg: "String should match pattern '^[A-Za-z_][A-Za-z0-9_]*$'",
      type: 'string_pattern_mismatch',
      input: '1a',
    });
  });
});
