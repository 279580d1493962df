/**
 * The one class of tool failure (src/server/computer/failure.ts): what a tool reports in
 * `error` (HTTP 200). Its own message goes out verbatim, whatever the path; another error's
 * message names the path it concerns when there is one; `reportFailure` turns a tool failure
 * into `{ error }` and lets every other error through; a code and the system's words ride along
 * for the callers that branch on them.
 */
import { describe, expect, it } from 'vitest';
import {
  failureText,
  isToolFailure,
  reportFailure,
  ToolFailure,
} from '../../src/server/computer/failure.js';

describe('ToolFailure', () => {
  it('carries a code and a reason when given, the message as its reason otherwise', () => {
    const plain = new ToolFailure('Refusing: the reason');
    expect(plain.name).toBe('ToolFailure');
    expect(plain).toBeInstanceOf(Error);
    expect(plain.code).toBeUndefined();
    expect(plain.reason).toBe('Refusing: the reason');
    const coded = new ToolFailure('Permission denied: /x', {
      code: 'EACCES',
      reason: 'Permission denied',
    });
    expect([coded.code, coded.reason]).toEqual(['EACCES', 'Permission denied']);
    expect(isToolFailure(coded)).toBe(true);
    expect(isToolFailure(new Error('Permission denied'))).toBe(false);
  });
});

describe('failureText', () => {
  it("passes the tools' own failures on verbatim, whatever the path", () => {
    expect(failureText(new ToolFailure('Refusing: the reason'), '/home/user/x')).toBe(
      'Refusing: the reason',
    );
  });

  it('names the path other failures concern, when there is one', () => {
    expect(failureText(new Error('No such file or directory'), '/home/user/x')).toBe(
      'No such file or directory: /home/user/x',
    );
    expect(failureText(new Error('No such file or directory'))).toBe('No such file or directory');
    expect(failureText(new Error('boom'), '')).toBe('boom');
    expect(failureText('a string thrown', '/p')).toBe('a string thrown: /p');
  });

  it('reads the text of anything thrown', () => {
    expect(failureText(new TypeError('bad'))).toBe('bad');
    expect(failureText('plain')).toBe('plain');
    expect(failureText(42)).toBe('42');
    expect(failureText(undefined)).toBe('undefined');
  });
});

describe('reportFailure', () => {
  it("answers the function's result when it succeeds", async () => {
    expect(await reportFailure(() => Promise.resolve({ output: 'ok' }))).toEqual({ output: 'ok' });
  });

  it('answers `{ error }` for a tool failure, and nothing else', async () => {
    const r = await reportFailure(() => Promise.reject(new ToolFailure('At most 16 sessions')));
    expect(r).toEqual({ error: 'At most 16 sessions' });
    expect(Object.keys(r)).toEqual(['error']);
  });

  it('lets any other error through as it is', async () => {
    const bug = new TypeError('a bug');
    await expect(reportFailure(() => Promise.reject(bug))).rejects.toBe(bug);
  });
});
