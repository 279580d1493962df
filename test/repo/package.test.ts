/**
 * The package as a user gets it: `npm pack` of the current build (npm test builds first), then
 * `npm install` of the tarball into an empty project with only TypeScript and Node's types
 * (`--prefer-offline`: npm's cache where it has them, else the registry; `npm ci` caches the
 * lockfile's tarballs but not the registry metadata a version range needs, so a new machine's
 * cache never has all of it). It holds what the README links and nothing of the checkout's tests;
 * its source maps carry their sources; a project without any optional peer type-checks with
 * `skipLibCheck` off and imports it at run time; with a peer installed, that peer's types are the
 * real ones (not `any`). The install prints no warning about engines, install scripts or
 * deprecations (issue 20).
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  bin: Record<string, string>;
  exports: Record<string, string | Record<string, string>>;
  peerDependencies: Record<string, string>;
};
const versionOf = (name: string) =>
  (
    JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;

let tmp: string;
let tarball: string;
let files: string[];
let project: string;
/** What `npm install` of the tarball printed. */
let installOutput: string;

/** Runs a command; resolves to its output, or rejects with its output in the message. */
async function sh(cmd: string, args: string[], cwd: string, timeout = 240_000) {
  try {
    const { stdout, stderr } = await run(cmd, args, { cwd, timeout, maxBuffer: 64 << 20 });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? e.message}`);
  }
}

/** tsc in the project on `file`, with skipLibCheck off; its output, or a rejection with it. */
function typecheck(file: string, lib: string[] = []) {
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2023',
        lib: ['ES2023', 'ESNext.Disposable', ...lib],
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        skipLibCheck: false,
        noEmit: true,
        types: ['node'],
      },
      files: [file],
    }),
  );
  return sh(join(project, 'node_modules/.bin/tsc'), ['-p', '.'], project);
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'burrow-pack-'));
  const out = await sh(
    'npm',
    ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp],
    root,
  );
  const [packed] = JSON.parse(out.slice(out.indexOf('['), out.lastIndexOf(']') + 1)) as {
    filename: string;
    files: { path: string }[];
  }[];
  tarball = join(tmp, packed!.filename);
  files = packed!.files.map((f) => f.path);
  project = join(tmp, 'project');
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'user-project', private: true, type: 'module' }),
  );
  // as a user installs it: scripts allowed, so a lifecycle script of the package would show
  installOutput = await sh(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      tarball,
      `typescript@${versionOf('typescript')}`,
      `@types/node@${versionOf('@types/node')}`,
    ],
    project,
  );
}, 300_000);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('the tarball', () => {
  it("holds the build, the licence and every document the README links, not the checkout's tests", () => {
    for (const f of ['package.json', 'README.md', 'LICENSE', 'dist/src/index.js']) {
      expect(files).toContain(f);
    }
    const targets = Object.values(pkg.exports).flatMap((t) =>
      typeof t === 'string' ? [t] : Object.values(t),
    );
    for (const target of [...targets, ...Object.values(pkg.bin)]) {
      expect(files, target).toContain(target.replace(/^\.\//, ''));
    }
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)]
      .map((m) => m[1]!)
      .filter((l) => !/^[a-z]+:/.test(l));
    expect(links.length).toBeGreaterThan(3);
    for (const link of links) {
      const path = link.replace(/^\.\//, '');
      expect(
        files.some((f) => f === path || f.startsWith(path.endsWith('/') ? path : `${path}/`)),
        link,
      ).toBe(true);
    }
    // every file the server loads beside its modules (pages, Python) is there
    const assets = execFileSync('git', ['ls-files', 'src'], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter((f) => /\.(py|html|css|mjs)$/.test(f));
    expect(assets.length).toBeGreaterThan(5);
    for (const asset of assets) expect(files, asset).toContain(`dist/${asset}`);
    expect(
      files.filter((f) => /^(test|bench|scripts|\.ci)\/|\.test\.|^src\/.*\.ts$/.test(f)),
    ).toEqual([]);
  });

  it('ships source maps that carry their sources', async () => {
    const dir = join(tmp, 'unpacked');
    mkdirSync(dir);
    await sh('tar', ['-xzf', tarball, '-C', dir], root);
    const maps = files.filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(50);
    for (const map of maps) {
      const m = JSON.parse(readFileSync(join(dir, 'package', map), 'utf8')) as {
        sources: string[];
        sourcesContent?: (string | null)[];
      };
      expect(m.sourcesContent?.length, map).toBe(m.sources.length);
      expect(
        m.sourcesContent!.every((s) => typeof s === 'string' && s.length > 0),
        map,
      ).toBe(true);
    }
  });
});

describe('npm install of the tarball', () => {
  it('prints no engine, install-script or deprecation warning', () => {
    // cookie 2 (through fastify's light-my-request) wants Node 22; package.json pins
    // light-my-request to the line that uses cookie 1, so the tree runs on Node 20
    expect(installOutput).not.toMatch(/EBADENGINE|Unsupported engine/);
    // the build runs on `npm pack` (prepack), never in the user's project
    expect(installOutput).not.toMatch(/install-scripts|prepare|postinstall/);
    expect(installOutput).not.toMatch(/deprecated/i);
    expect(installOutput).toMatch(/added \d+ packages?/);
  });

  it('gives the package no script that runs when it is installed', () => {
    const installed = JSON.parse(
      readFileSync(join(project, 'node_modules', pkg.name, 'package.json'), 'utf8'),
    ) as { scripts?: Record<string, string> };
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) {
      expect(installed.scripts?.[hook], hook).toBeUndefined();
    }
  });

  it('installs no package whose engines exclude this Node', () => {
    const major = Number(process.versions.node.split('.')[0]);
    const tooNew: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        if (name.startsWith('.')) continue;
        if (name.startsWith('@')) {
          walk(join(dir, name));
          continue;
        }
        const manifest = join(dir, name, 'package.json');
        if (!existsSync(manifest)) continue;
        const { engines } = JSON.parse(readFileSync(manifest, 'utf8')) as {
          engines?: { node?: string };
        };
        // the ranges npm warns about here are ">=N": a lower bound past this Node's major
        const floor = /^>=\s*(\d+)/.exec(engines?.node?.trim() ?? '')?.[1];
        if (floor !== undefined && Number(floor) > major) tooNew.push(`${name} (${engines!.node})`);
        const nested = join(dir, name, 'node_modules');
        if (existsSync(nested)) walk(nested);
      }
    };
    walk(join(project, 'node_modules'));
    expect(tooNew).toEqual([]);
  });
});

describe('installed without any optional peer', () => {
  it('has none of them', () => {
    for (const peer of Object.keys(pkg.peerDependencies)) {
      expect(() => readFileSync(join(project, 'node_modules', peer, 'package.json'))).toThrow();
    }
  });

  it('type-checks a program using every entry point, skipLibCheck off', async () => {
    writeFileSync(
      join(project, 'all.ts'),
      [
        `import { Burrow, openSession, BurrowError, type Instance, type VersionResult } from '${pkg.name}';`,
        `import { startServer } from '${pkg.name}/server';`,
        `import { connect as playwright } from '${pkg.name}/playwright';`,
        `import { connect as puppeteer } from '${pkg.name}/puppeteer';`,
        `import { test } from '${pkg.name}/playwright-test';`,
        "const client = new Burrow({ apiKey: 'k' });",
        'const version: Promise<VersionResult> = client.meta.version();',
        'const list: Promise<Instance[]> = client.instances.list();',
        'export { version, list, openSession, startServer, playwright, puppeteer, test, BurrowError };',
      ].join('\n'),
    );
    await typecheck('all.ts');
  });

  it('imports at run time; a driver without its peer says which package to install', async () => {
    const script = [
      `const root = await import('${pkg.name}');`,
      "if (typeof root.openSession !== 'function') throw new Error('no openSession');",
      `const pw = await import('${pkg.name}/playwright');`,
      "await pw.connect('ws://127.0.0.1:9/x').then(() => { throw new Error('connected?'); },",
      '  (e) => console.log(e.code, e.packageName));',
    ].join('\n');
    writeFileSync(join(project, 'run.mjs'), script);
    expect((await sh(process.execPath, ['run.mjs'], project)).trim()).toBe(
      'peer_missing playwright-core',
    );
  });

  it("types a driver's objects as the peer's own once it is installed", async () => {
    writeFileSync(
      join(project, 'typed.ts'),
      [
        `import { openSession } from '${pkg.name}';`,
        'const session = await openSession();',
        "// @ts-expect-error: Playwright's goto takes a URL string",
        'await session.page.goto(42);',
      ].join('\n'),
    );
    // without the peer `page` is `any`: the expected error does not happen
    await expect(typecheck('typed.ts')).rejects.toThrow(/Unused '@ts-expect-error'/);
    symlinkSync(
      join(root, 'node_modules/playwright-core'),
      join(project, 'node_modules/playwright-core'),
    );
    await typecheck('typed.ts', ['DOM']); // Playwright's own types need the DOM's
  }, 180_000); // two tsc runs over Playwright's types: ~20 s on a quiet machine, minutes on a busy one
});
