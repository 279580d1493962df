/**
 * The profile skeleton follows the Chromium binary (src/server/chromium/profile-template.ts): made
 * once for a binary, with real sandboxes and a real Chromium, and made anew when the binary
 * changes under the running server (a package upgrade or downgrade); none is seeded while the
 * binary cannot be read.
 *
 * The binary's change is the one injected fault: replacing /usr/lib/chromium/chromium during a
 * test is not something a test may do to its machine, so the template is given an identity the
 * test changes. `binaryIdentity`, the default, is checked on real files.
 */
import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  binaryIdentity,
  PROFILE_DIR,
  ProfileTemplate,
} from '../../../src/server/chromium/profile-template.js';
import type { Logger } from '../../../src/internal/log.js';
import { Sandbox, type SandboxHost } from '../../../src/server/sandbox/index.js';
import { testSandboxHost } from '../../helpers/sandbox.js';

const CHROMIUM = process.env.BURROW_CHROMIUM ?? '/usr/lib/chromium/chromium';

let work: string;
let host: SandboxHost;
const boxes: Sandbox[] = [];
/** The identity the template sees; changed by the tests as an upgrade would. */
let version = 'chromium-1';
let unreadable = false;
/** The identity each template was made for, in order. */
const made: string[] = [];
const infos: string[] = [];

const log: Logger = {
  info: (o, m) => infos.push(String(m ?? o)),
  warn() {},
  error() {},
  debug: (_o, m) => {
    if (m === 'Chromium profile template made') made.push(version);
  },
};

let template: ProfileTemplate;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'burrow-tplbin-'));
  host = await testSandboxHost(join(work, `run-${process.pid}-tplbin`));
  template = new ProfileTemplate({
    host,
    mint: () => `inst_${randomBytes(8).toString('hex')}`,
    dirOf: (name) => join(work, name),
    chromiumPath: CHROMIUM,
    chromiumFlags: [],
    windowSize: [1024, 768],
    log,
    identity: async () => {
      if (unreadable) throw new Error('ENOENT: the binary is being replaced');
      return version;
    },
  });
}, 60_000);

afterAll(async () => {
  await template?.close();
  await Promise.all(boxes.map((b) => b.stop()));
  await host?.close();
  rmSync(work, { recursive: true, force: true });
});

/** A fresh sandbox with the template seeded into it: the files under its profile's `Default/`. */
async function seeded(): Promise<string[]> {
  const name = `tplbin-${process.pid}-${boxes.length}`;
  mkdirSync(join(work, name));
  const box = await Sandbox.create(host, { dir: join(work, name), name, log });
  boxes.push(box);
  await template.seed(box);
  const dir = join(box.hostHome, PROFILE_DIR, 'Default');
  return existsSync(dir) ? readdirSync(dir, { recursive: true }).map(String).sort() : [];
}

describe('the profile template and the Chromium binary', () => {
  it('is made once for a binary, and anew after the binary changed', async () => {
    const first = await seeded();
    expect(first).toContain('Cookies');
    expect(made).toEqual(['chromium-1']);

    expect(await seeded()).toEqual(first);
    expect(made).toEqual(['chromium-1']); // the same binary: the same template, not made again

    version = 'chromium-2'; // upgraded under the running server
    const after = await seeded();
    expect(made).toEqual(['chromium-1', 'chromium-2']);
    expect(after).toContain('Cookies');
    expect(infos.some((m) => /binary changed/.test(m))).toBe(true);

    expect(await seeded()).toEqual(after);
    expect(made).toHaveLength(2);
  }, 120_000);

  it('seeds nothing while the binary cannot be read, and makes none', async () => {
    unreadable = true;
    try {
      expect(await seeded()).toEqual([]);
      expect(made).toHaveLength(2);
    } finally {
      unreadable = false;
    }
  });
});

describe('binaryIdentity', () => {
  it('is the same through a link, and differs for a copy of the same bytes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'burrow-binid-'));
    try {
      const file = join(dir, 'a');
      copyFileSync('/bin/true', file);
      symlinkSync(file, join(dir, 'link'));
      expect(await binaryIdentity(join(dir, 'link'))).toBe(await binaryIdentity(file));
      // a package's new version is a new file put in place of the old one
      copyFileSync(file, join(dir, 'b'));
      expect(await binaryIdentity(join(dir, 'b'))).not.toBe(await binaryIdentity(file));
      await expect(binaryIdentity(join(dir, 'missing'))).rejects.toThrow(/ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
