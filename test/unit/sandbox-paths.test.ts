/**
 * The path helpers the file tools use (src/server/toolbox/paths.ts): `isUnder` decides whether a
 * copy would go into its own source, so a sibling that shares a prefix (`/home/user2` next to
 * `/home/user`) must not count as below it; display paths fold `..` lexically for messages.
 * (How a tool's message names the path it concerns: tool-failure.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { displayPath, isUnder } from '../../src/server/toolbox/paths.js';

describe('isUnder', () => {
  it('is true for the root itself and what lies below it', () => {
    expect(isUnder('/home/user', '/home/user')).toBe(true);
    expect(isUnder('/home/user/a', '/home/user')).toBe(true);
    expect(isUnder('/home/user/a/b/c', '/home/user')).toBe(true);
    expect(isUnder('/', '/')).toBe(true);
    expect(isUnder('/etc', '/')).toBe(true);
  });

  it('is false for a sibling sharing the prefix, a parent, and elsewhere', () => {
    expect(isUnder('/home/user2', '/home/user')).toBe(false);
    expect(isUnder('/home/user.bak/x', '/home/user')).toBe(false);
    expect(isUnder('/home', '/home/user')).toBe(false);
    expect(isUnder('/tmp/x', '/home/user')).toBe(false);
    expect(isUnder('home/user/x', '/home/user')).toBe(false);
  });
});

describe('displayPath', () => {
  it('makes a path absolute against the home and folds `.` and `..`', () => {
    expect(displayPath('/home/user', 'notes.txt')).toBe('/home/user/notes.txt');
    expect(displayPath('/home/user', './a/../b')).toBe('/home/user/b');
    expect(displayPath('/home/user', '../../etc/passwd')).toBe('/etc/passwd');
    expect(displayPath('/home/user', '/tmp/x/')).toBe('/tmp/x');
  });
});
