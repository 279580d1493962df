/**
 * Uploaded browser extensions, unpacked under `<dataDir>/extensions/<id>/`: `files/` holds the
 * extension as Chromium loads it, `extension.json` what the API lists. An upload is unpacked into a
 * temporary directory beside them and renamed into place only once every file is written and the
 * manifest is checked, so a refused or interrupted upload leaves nothing (temporary directories of
 * a server that died mid-upload are removed when the next one opens the store).
 *
 * Instances never see these directories: a browser instance gets a read-only copy on its own disk
 * (browser/index.ts, `Sandbox.seedReadOnly`).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ExtensionInfo } from '../../api/index.js';
import { SerialQueue } from '../../internal/serial.js';
import { serverError } from '../errors.js';
import { readZip, ZipError, type ZipEntry } from './zip.js';

/** Most files an extension's archive may hold. */
export const MAX_EXTENSION_ENTRIES = 10_000;
/** Most extensions one instance may start with. */
export const MAX_EXTENSIONS_PER_INSTANCE = 20;

const ID = /^ext_[0-9a-f]{16}$/;
const TMP_PREFIX = '.tmp-';

export interface StoredExtension extends ExtensionInfo {
  /** The unpacked extension on the host. */
  readonly dir: string;
}

/**
 * Why an archive is not an extension burrow loads; the HTTP face answers it as a FastAPI-shaped
 * 422 on the `file` field (http/extension-routes.ts).
 */
export class ExtensionInvalid extends Error {
  constructor(readonly reason: string) {
    super(`Not an extension burrow can load: ${reason}`);
  }
}

const invalid = (reason: string) => new ExtensionInvalid(reason);

/** The manifest's fields the API reports, checked as Chromium would refuse them. */
function checkManifest(raw: Buffer): {
  name: string;
  version: string;
  manifest_version: number;
  description: string | null;
} {
  let manifest: unknown;
  try {
    manifest = JSON.parse(raw.toString('utf8').replace(/^\uFEFF/, ''));
  } catch {
    throw invalid('manifest.json is not valid JSON');
  }
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest)) {
    throw invalid('manifest.json is not a JSON object');
  }
  const m = manifest as Record<string, unknown>;
  if (m.manifest_version !== 3) {
    throw invalid(
      `manifest.json has manifest_version ${JSON.stringify(m.manifest_version ?? null)}; Chromium loads only 3`,
    );
  }
  if (typeof m.name !== 'string' || m.name.trim() === '') {
    throw invalid('manifest.json has no name');
  }
  if (typeof m.version !== 'string' || !/^\d{1,9}(\.\d{1,9}){0,3}$/.test(m.version)) {
    throw invalid('manifest.json has no version of one to four dot-separated numbers');
  }
  const description = typeof m.description === 'string' ? m.description : null;
  return { name: m.name, version: m.version, manifest_version: 3, description };
}

/**
 * The entries with the archive's one top folder taken off when `manifest.json` sits in it (what
 * zipping a folder gives), else as they are.
 */
function rooted(entries: ZipEntry[]): ZipEntry[] {
  if (entries.some((e) => e.name === 'manifest.json' && !e.directory)) return entries;
  const tops = new Set(entries.map((e) => e.name.split('/', 1)[0]!));
  const [top] = tops;
  if (tops.size !== 1 || !entries.some((e) => e.name === `${top}/manifest.json`)) {
    throw invalid('the archive has no manifest.json at its top (or in its one top folder)');
  }
  return entries
    .filter((e) => e.name !== top)
    .map((e) => ({ name: e.name.slice(top!.length + 1), directory: e.directory, read: e.read }));
}

export class ExtensionStore {
  readonly #root: string;
  readonly #maxBytes: number;
  readonly #queue = new SerialQueue();
  readonly #items = new Map<string, StoredExtension>();
  /** Resolves once the extensions on disk are read and leftovers removed. */
  readonly ready: Promise<void>;

  constructor(dataDir: string, opts: { maxBytes: number }) {
    this.#root = join(dataDir, 'extensions');
    this.#maxBytes = opts.maxBytes;
    this.ready = this.#load();
  }

  /** Largest archive accepted, and largest unpacked size, in bytes. */
  get maxBytes(): number {
    return this.#maxBytes;
  }

  async #load(): Promise<void> {
    await mkdir(this.#root, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.#root)) {
      const dir = join(this.#root, name);
      if (name.startsWith(TMP_PREFIX)) {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      if (!ID.test(name)) continue;
      try {
        const info = JSON.parse(
          await readFile(join(dir, 'extension.json'), 'utf8'),
        ) as ExtensionInfo;
        this.#items.set(name, { ...info, id: name, dir: join(dir, 'files') });
      } catch {
        // not ours or damaged: left alone, not listed
      }
    }
  }

  list(): ExtensionInfo[] {
    return [...this.#items.values()]
      .map(({ dir: _dir, ...info }) => info)
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  /** The extensions named by `ids`, in that order; a 404 naming the first unknown one. */
  resolve(ids: readonly string[]): StoredExtension[] {
    return ids.map((id) => {
      const found = this.#items.get(id);
      if (!found) throw serverError('extension_not_found', { id: JSON.stringify(id) });
      return found;
    });
  }

  /** Unpacks the zip archive `zip`, checks it, and keeps it under a new id. */
  async add(zip: Buffer, filename: string | null): Promise<ExtensionInfo> {
    await this.ready;
    if (zip.length > this.#maxBytes) {
      throw serverError('extension_too_large', { limit: this.#maxBytes });
    }
    let entries: ZipEntry[];
    try {
      entries = rooted(
        readZip(zip, { maxBytes: this.#maxBytes, maxEntries: MAX_EXTENSION_ENTRIES }),
      );
    } catch (err) {
      if (err instanceof ZipError) throw invalid(err.message);
      throw err;
    }
    // Chromium keeps names starting with `_` for itself (it writes `_metadata` into the folder)
    const reserved = entries.find((e) => /^_(?!locales(\/|$))/.test(e.name));
    if (reserved) {
      throw invalid(
        `entry ${JSON.stringify(reserved.name)} starts with "_", which Chromium reserves`,
      );
    }
    let manifest: ReturnType<typeof checkManifest>;
    try {
      manifest = checkManifest(entries.find((e) => e.name === 'manifest.json')!.read());
    } catch (err) {
      if (err instanceof ZipError) throw invalid(err.message);
      throw err;
    }
    const id = `ext_${randomBytes(8).toString('hex')}`;
    const tmp = join(this.#root, `${TMP_PREFIX}${id}`);
    try {
      const files = join(tmp, 'files');
      await mkdir(files, { recursive: true, mode: 0o700 });
      let size = 0;
      for (const entry of entries) {
        const target = join(files, entry.name);
        if (entry.directory) {
          await mkdir(target, { recursive: true });
          continue;
        }
        let bytes: Buffer;
        try {
          bytes = entry.read();
        } catch (err) {
          if (err instanceof ZipError) throw invalid(err.message);
          throw err;
        }
        size += bytes.length;
        await mkdir(dirname(target), { recursive: true });
        // `wx`: a name met twice (in another spelling) fails instead of replacing a file
        await writeFile(target, bytes, { flag: 'wx', mode: 0o644 });
      }
      const info: ExtensionInfo = {
        id,
        ...manifest,
        filename,
        size_bytes: size,
        created_at: new Date().toISOString(),
      };
      await writeFile(join(tmp, 'extension.json'), JSON.stringify(info), { mode: 0o600 });
      await this.#queue.run(async () => {
        await rename(tmp, join(this.#root, id));
        this.#items.set(id, { ...info, dir: join(this.#root, id, 'files') });
      });
      return info;
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw invalid('two entries name the same file');
      }
      throw err;
    }
  }

  /** Removes an extension; instances started with it keep their own copy. */
  async delete(id: string): Promise<void> {
    await this.ready;
    await this.#queue.run(async () => {
      if (!this.#items.has(id))
        throw serverError('extension_not_found', { id: JSON.stringify(id) });
      this.#items.delete(id);
      const dir = join(this.#root, id);
      // renamed away first, so a crash mid-removal leaves a temporary directory, not half an extension
      const doomed = join(this.#root, `${TMP_PREFIX}gone-${id}`);
      await rename(dir, doomed);
      await rm(doomed, { recursive: true, force: true });
    });
  }

  /** Whether the stored copy is still there (for tests and sanity checks). */
  async exists(id: string): Promise<boolean> {
    return stat(join(this.#root, id, 'files', 'manifest.json')).then(
      () => true,
      () => false,
    );
  }
}
