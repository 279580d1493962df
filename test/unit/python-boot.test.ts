/**
 * The loader of the Python programs the server sends into instances (src/internal/python.ts):
 * modules arrive on stdin, are importable by name from the program, the program runs as
 * `__main__`, and what follows the message on stdin is left for the program's own protocol.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { pythonBoot, pythonMessage } from '../../src/internal/python.js';

const PYTHON = '/usr/bin/python3';

function run(label: string, message: Buffer, rest: string) {
  const r = spawnSync(PYTHON, ['-I', '-c', pythonBoot(label)], {
    input: Buffer.concat([message, Buffer.from(rest)]),
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('pythonBoot and pythonMessage', () => {
  it('load the modules in order, run the last as __main__, and leave the rest of stdin', () => {
    const message = pythonMessage([
      { name: 'first', source: 'VALUE = "é" * 2\n' },
      { name: 'second', source: Buffer.from('from first import VALUE\nDOUBLE = VALUE * 2\n') },
      {
        name: 'prog',
        source: [
          'import sys',
          'from second import DOUBLE',
          'if __name__ == "__main__":',
          '    print(DOUBLE, sys.stdin.read().replace("\\n", " "))',
        ].join('\n'),
      },
    ]);
    const r = run('prog.py', message, 'line one\nand the rest');
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('éééé line one and the rest');
    expect(r.status).toBe(0);
  });

  it("name the program's frames by its label", () => {
    const r = run(
      '<burrow-test>',
      pythonMessage([{ name: 'p', source: 'raise SystemExit(1/0)' }]),
      '',
    );
    expect(r.stderr).toContain('File "<burrow-test>", line 1');
    expect(r.status).not.toBe(0);
  });

  it('refuse a label that could break out of the boot program, and an empty program', () => {
    expect(() => pythonBoot("x',exec);import os#")).toThrow(/bad label/);
    expect(() => pythonMessage([])).toThrow(/no modules/);
  });
});
