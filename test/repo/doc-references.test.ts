/**
 * Comments and documents point at files of this repository: no path outside it (the directory
 * the project was planned in, its design notes), and every repository path named in a Markdown
 * file or a comment exists. The spec copied into docs/spec/ is kept as it was given and not read.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const tracked = execFileSync(
  'git',
  ['ls-files', 'README.md', 'docs', 'src', 'adapters', 'examples', 'test', 'bench', 'scripts'],
  { cwd: root, encoding: 'utf8' },
)
  .split('\n')
  .filter((f) => /\.(md|ts|mjs|py|html)$/.test(f) && !f.startsWith('docs/spec/'))
  .filter((f) => existsSync(join(root, f)));

/** Names of places outside the repository that earlier comments pointed at. */
const OUTSIDE = /\/work\/shared|\.\.\/shared\b|steering repo|\bDESIGN\.md\b|\bSTYLE\.md\b/;
/** A repository-relative path to a file. */
const PATH =
  /(?<![\w./-])((?:docs|src|test|examples|bench|scripts|adapters)\/[\w./-]*\w\.(?:md|ts|mjs|html|py|json))/g;
/** Lines of a source file that are comment text. */
const COMMENT = /^\s*(\/\*\*?|\*|\/\/|#)/;

function lines(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8').split('\n');
  return file.endsWith('.md') ? text : text.filter((l) => COMMENT.test(l));
}

describe('references in comments and documents', () => {
  it('reads the tree', () => {
    expect(tracked).toContain('README.md');
    expect(tracked.filter((f) => f.startsWith('src/')).length).toBeGreaterThan(50);
  });

  it('name no place outside the repository', () => {
    const found = tracked.flatMap((f) =>
      readFileSync(join(root, f), 'utf8')
        .split('\n')
        .flatMap((l, i) =>
          OUTSIDE.test(l) && f !== 'test/repo/doc-references.test.ts'
            ? [`${f}:${i + 1}: ${l.trim()}`]
            : [],
        ),
    );
    expect(found).toEqual([]);
  });

  it('name only repository files that exist', () => {
    const missing = tracked.flatMap((f) =>
      lines(f).flatMap((l) =>
        [...l.matchAll(PATH)]
          .map((m) => m[1]!)
          .filter((p) => !existsSync(join(root, p)))
          .map((p) => `${f}: ${p}`),
      ),
    );
    expect(missing).toEqual([]);
  });
});
