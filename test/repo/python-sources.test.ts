/**
 * The Python that ships in src/ (the kernel bridge, the sandbox's toolbox …) is checked by
 * Python's own tools (non-TypeScript code is checked by its language's tools):
 * `py_compile` always, and `pyflakes` (Debian's python3-pyflakes) when /usr/bin/python3 can
 * import it. The test's name says which checks ran.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/** The interpreter the server runs Python with (Debian's, which has ipykernel). */
const PYTHON = '/usr/bin/python3';
const root = fileURLToPath(new URL('../..', import.meta.url));

const sources = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' })
  .filter((p) => p.endsWith('.py'))
  .map((p) => join(root, 'src', p))
  .sort();

const hasPyflakes = spawnSync(PYTHON, ['-c', 'import pyflakes']).status === 0;
const checks = hasPyflakes
  ? 'py_compile and pyflakes'
  : `py_compile (pyflakes not run: ${PYTHON} cannot import it)`;

// py_compile writes bytecode; keep it out of src/
const pycache = mkdtempSync(join(tmpdir(), 'burrow-pycache-'));
afterAll(() => rmSync(pycache, { recursive: true, force: true }));

function python(args: string[]): { status: number | null; output: string } {
  const r = spawnSync(PYTHON, args, {
    cwd: root,
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin', PYTHONPYCACHEPREFIX: pycache },
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

describe('Python sources under src/', () => {
  it('include the kernel bridge', () => {
    expect(sources.map((p) => relative(root, p))).toContain('src/server/ubuntu/kernels/bridge.py');
  });

  it(`pass ${checks}`, () => {
    const compiled = python(['-m', 'py_compile', ...sources]);
    expect(compiled.output, 'py_compile').toBe('');
    expect(compiled.status).toBe(0);
    if (!hasPyflakes) return;
    const flakes = python(['-m', 'pyflakes', ...sources]);
    expect(flakes.output, 'pyflakes').toBe('');
    expect(flakes.status).toBe(0);
  });
});
