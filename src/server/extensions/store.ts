/**
 * Uploaded browser extensions, unpacked under `<dataDir>/extensions/<id>/`: `files/` holds the
 * extension as Chromium loads it, `extension.json` what the API lists. An upload is unpacked into a
 * temporary directory beside them and renamed into place only once every file is written and the
 * manifest is checked, so a refused or interrupted upload leaves nothing (temporary directories of
 * a server that died mid-upload are removed when the next one opens the store).
 *
 * **On a cluster node** (`shared`: ../cluster/extension-backend.ts) the extensions are the
 * cluster's, in its database: an upload, checked here as on a single server, is stored there as
 * its archive with the archive's SHA-256, and listed and deleted through any node. That
 * directory is then this node's cache: a start naming an extension this node does not hold
 * fetches the archive, checks its digest, unpacks it as an upload (checked again) into a
 * temporary directory and renames it into place. Whether an extension still exists is asked of
 * the database at every start, and a delete is announced to every node, which drops its copy.
 *
 * Instances never see these directories: a browser instance gets a read-only copy on its own disk
 * (browser/index.ts, `Sandbox.seedReadOnly`).
 */
import { createHash, randomBytes } from 'node:crypto';
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
/** The archive's SHA-256 beside `extension.json`: which version of an extension a copy is. */
const DIGEST = 'archive.sha256';

export interface StoredExtension extends ExtensionInfo {
  /** The unpacked extension on the host. */
  readonly dir: string;
}

/** The cluster's extensions (../cluster/extension-backend.ts), as this store uses them. */
export interface SharedExtensions {
  /** Keep a checked upload: what the API lists, its archive and the archive's SHA-256 (hex). */
  insert(info: ExtensionInfo, archive: Buffer, digest: string): Promise<void>;
  list(): Promise<ExtensionInfo[]>;
  /** The digests of those of `ids` that exist. */
  digests(ids: readonly string[]): Promise<Map<string, string>>;
  /** The stored archive of `id`, its digest and what the API lists of it; undefined when there is none. */
  archive(
    id: string,
  ): Promise<{ info: ExtensionInfo; archive: Buffer; digest: string } | undefined>;
  /** Remove `id` and tell every node; false when there is none. */
  delete(id: string): Promise<boolean>;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

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

interface Cached extends StoredExtension {
  /** SHA-256 of the archive it was unpacked from (absent for uploads of older versions). */
  readonly digest?: string | undefined;
}

/** What the API lists of a stored extension. */
const infoOf = (e: Cached): ExtensionInfo => ({
  id: e.id,
  name: e.name,
  version: e.version,
  manifest_version: e.manifest_version,
  description: e.description,
  filename: e.filename,
  size_bytes: e.size_bytes,
  created_at: e.created_at,
});

export class ExtensionStore {
  readonly #root: string;
  readonly #maxBytes: number;
  readonly #caps: { count: number; bytes: number };
  readonly #shared: SharedExtensions | undefined;
  readonly #queue = new SerialQueue();
  readonly #items = new Map<string, Cached>();
  /** Extensions being fetched from the cluster, by id (two starts fetch one once). */
  readonly #fetching = new Map<string, Promise<Cached>>();
  /** Resolves once the extensions on disk are read and leftovers removed. */
  readonly ready: Promise<void>;

  /** `caps`: extensions kept at most, and their unpacked bytes together (none: no cap). */
  constructor(
    dataDir: string,
    opts: {
      maxBytes: number;
      caps?: { count: number; bytes: number } | undefined;
      shared?: SharedExtensions | undefined;
    },
  ) {
    this.#root = join(dataDir, 'extensions');
    this.#maxBytes = opts.maxBytes;
    this.#caps = opts.caps ?? { count: Infinity, bytes: Infinity };
    this.#shared = opts.shared;
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
        const digest = await readFile(join(dir, DIGEST), 'utf8').catch(() => undefined);
        this.#items.set(name, { ...info, id: name, dir: join(dir, 'files'), digest });
      } catch {
        // not ours or damaged: left alone, not listed
      }
    }
  }

  async list(): Promise<ExtensionInfo[]> {
    if (this.#shared) return this.#shared.list();
    return [...this.#items.values()]
      .map(infoOf)
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  /**
   * The extensions named by `ids`, in that order, on this host; a 404 naming the first unknown
   * one. On a cluster node, what this node does not hold yet is fetched from the database.
   */
  async resolve(ids: readonly string[]): Promise<StoredExtension[]> {
    const notFound = (id: string) => serverError('extension_not_found', { id: JSON.stringify(id) });
    if (!this.#shared) {
      return ids.map((id) => {
        const found = this.#items.get(id);
        if (!found) throw notFound(id);
        return found;
      });
    }
    await this.ready;
    const digests = ids.length > 0 ? await this.#shared.digests(ids) : new Map<string, string>();
    const out: StoredExtension[] = [];
    for (const id of ids) {
      const digest = digests.get(id);
      if (digest === undefined) {
        // deleted through a node whose announcement this one missed: its copy goes too
        if (this.#items.has(id)) await this.evict(id);
        throw notFound(id);
      }
      const cached = this.#items.get(id);
      if (cached?.digest === digest) {
        out.push(cached);
        continue;
      }
      let fetching = this.#fetching.get(id);
      if (!fetching) {
        fetching = this.#materialise(id, digest).finally(() => this.#fetching.delete(id));
        this.#fetching.set(id, fetching);
      }
      out.push(await fetching);
    }
    return out;
  }

  /** The cluster's extension `id` unpacked into this node's cache, its archive's digest checked. */
  async #materialise(id: string, digest: string): Promise<Cached> {
    const stored = await this.#shared!.archive(id);
    if (!stored) throw serverError('extension_not_found', { id: JSON.stringify(id) });
    if (stored.digest !== digest || sha256(stored.archive) !== digest) {
      throw new Error(`extension ${id}: the stored archive does not match its digest`);
    }
    const { tmp } = await this.#unpack(stored.archive, stored.info.filename, id);
    return this.#place(tmp, { ...stored.info, id }, digest);
  }

  /** Unpacks the zip archive `zip`, checks it, and keeps it under a new id. */
  async add(zip: Buffer, filename: string | null): Promise<ExtensionInfo> {
    await this.ready;
    const id = `ext_${randomBytes(8).toString('hex')}`;
    await this.#room(0); // before unpacking anything
    const { info, tmp } = await this.#unpack(zip, filename, id);
    const digest = sha256(zip);
    try {
      await this.#room(info.size_bytes);
      await this.#shared?.insert(info, zip, digest);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
    await this.#place(tmp, info, digest);
    return info;
  }

  /** A 507 unless one more extension of `bytes` (unpacked) fits the caps. */
  async #room(bytes: number): Promise<void> {
    const kept = await this.list();
    const full = (reason: string) => serverError('store_full', { what: 'an extension', reason });
    if (kept.length >= this.#caps.count) {
      throw full(
        `${kept.length} extensions are kept, the cap (maxExtensions) is ${this.#caps.count}`,
      );
    }
    const total = kept.reduce((n, e) => n + e.size_bytes, 0) + bytes;
    if (total > this.#caps.bytes) {
      throw full(
        `with it the extensions would take ${total} bytes, the cap (maxExtensionBytesTotal) is ${this.#caps.bytes}`,
      );
    }
  }

  /**
   * The archive checked and unpacked into a temporary directory (removed again when anything
   * is wrong): what the API lists of it, and where it is.
   */
  async #unpack(
    zip: Buffer,
    filename: string | null,
    id: string,
  ): Promise<{ info: ExtensionInfo; tmp: string }> {
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
      manifest = checkManifest(await entries.find((e) => e.name === 'manifest.json')!.read());
    } catch (err) {
      if (err instanceof ZipError) throw invalid(err.message);
      throw err;
    }
    const tmp = join(this.#root, `${TMP_PREFIX}${id}-${randomBytes(4).toString('hex')}`);
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
          bytes = await entry.read();
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
      return { info, tmp };
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw invalid('two entries name the same file');
      }
      throw err;
    }
  }

  /** The unpacked `tmp` renamed into place as `info.id`, replacing an older copy. */
  async #place(tmp: string, info: ExtensionInfo, digest: string): Promise<Cached> {
    try {
      await writeFile(join(tmp, 'extension.json'), JSON.stringify(info), { mode: 0o600 });
      await writeFile(join(tmp, DIGEST), digest, { mode: 0o600 });
      return await this.#queue.run(async () => {
        const dir = join(this.#root, info.id);
        await this.#drop(info.id);
        await rename(tmp, dir);
        const item: Cached = { ...info, dir: join(dir, 'files'), digest };
        this.#items.set(info.id, item);
        return item;
      });
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /** Removes an extension (on a cluster node: the cluster's); instances started with it keep their own copy. */
  async delete(id: string): Promise<void> {
    await this.ready;
    if (this.#shared) {
      if (!(await this.#shared.delete(id))) {
        throw serverError('extension_not_found', { id: JSON.stringify(id) });
      }
      await this.evict(id);
      return;
    }
    await this.#queue.run(async () => {
      if (!this.#items.has(id))
        throw serverError('extension_not_found', { id: JSON.stringify(id) });
      await this.#drop(id);
    });
  }

  /** This host's copy of `id` dropped (the cluster deleted it); nothing when there is none. */
  async evict(id: string): Promise<void> {
    if (!ID.test(id)) return;
    await this.ready;
    await this.#queue.run(() => this.#drop(id));
  }

  /** Forgets `id` and removes its directory; run in the queue. */
  async #drop(id: string): Promise<void> {
    this.#items.delete(id);
    const dir = join(this.#root, id);
    // renamed away first, so a crash mid-removal leaves a temporary directory, not half an extension
    const doomed = join(this.#root, `${TMP_PREFIX}gone-${id}-${randomBytes(4).toString('hex')}`);
    try {
      await rename(dir, doomed);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    await rm(doomed, { recursive: true, force: true });
  }

  /** Whether the stored copy is still there (for tests and sanity checks). */
  async exists(id: string): Promise<boolean> {
    return stat(join(this.#root, id, 'files', 'manifest.json')).then(
      () => true,
      () => false,
    );
  }
}
