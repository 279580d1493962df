/**
 * Persistent browser profiles: a Chromium user-data directory as an instance's Chromium left it
 * (cookies, localStorage, IndexedDB, service workers, cache, extension state), kept under
 * `<dataDir>/profiles/<name>.profile`, sealed with AES-256-GCM under the server's secret key (the
 * auth states' keyring, auth-states/secret-key.ts). A file is a first line of JSON (format, key
 * id, IV, tag) and then the ciphertext of the deflated archive (`pack` below); the profile's name
 * is bound in as associated data, so a file renamed to another name does not open.
 *
 * A profile is held by one live instance at a time (`acquire`): a second start naming it answers
 * 409 with the holder's id. A save writes the new file under a temporary name and renames it over
 * the old one, so a profile is always the old version or the new one, never half of either; a
 * save over the size limit keeps the old version.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { ProfileInfo } from '../../api/index.js';
import type { Keyring } from '../auth-states/secret-key.js';
import { serverError } from '../errors.js';
import type { InstanceProfile, ProfileEntry } from '../instances/runtime.js';

const FORMAT = 1;
const SUFFIX = '.profile';
const TMP_PREFIX = '.tmp-';
const aad = (name: string) => Buffer.from(`burrow profile ${name}`);

/** A name as the API takes it: letters, digits, `.`, `_`, `-`; not starting with a dot. */
export const PROFILE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/;

/** The entries as one buffer: per entry a kind byte, the path's length and bytes, the data's. */
export function pack(entries: readonly ProfileEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const path = Buffer.from(e.path);
    const head = Buffer.alloc(9);
    head.writeUInt8(e.data ? 1 : 2, 0);
    head.writeUInt32LE(path.length, 1);
    head.writeUInt32LE(e.data?.length ?? 0, 5);
    parts.push(head, path);
    if (e.data) parts.push(e.data);
  }
  return Buffer.concat(parts);
}

/** `pack` undone, each path checked to stay inside the profile; throws on anything malformed. */
export function unpack(buf: Buffer): ProfileEntry[] {
  const out: ProfileEntry[] = [];
  let at = 0;
  while (at < buf.length) {
    if (at + 9 > buf.length) throw new Error('truncated entry');
    const kind = buf.readUInt8(at);
    const pathLen = buf.readUInt32LE(at + 1);
    const size = buf.readUInt32LE(at + 5);
    at += 9;
    if ((kind !== 1 && kind !== 2) || at + pathLen + size > buf.length) {
      throw new Error('malformed entry');
    }
    const path = buf.toString('utf8', at, at + pathLen);
    at += pathLen;
    const parts = path.split('/');
    if (path.startsWith('/') || parts.some((p) => p === '' || p === '.' || p === '..')) {
      throw new Error(`entry ${JSON.stringify(path)} leaves the profile`);
    }
    if (kind === 1) out.push({ path, data: buf.subarray(at, at + size) });
    else out.push({ path });
    at += size;
  }
  return out;
}

interface Held {
  /** The holder's id; undefined while its start has not named it yet. */
  holder: string | undefined;
}

export class ProfileStore {
  readonly #root: string;
  readonly #keyring: Keyring;
  readonly #maxBytes: number;
  readonly #held = new Map<string, Held>();
  readonly ready: Promise<void>;

  constructor(dataDir: string, opts: { keyring: Keyring; maxBytes: number }) {
    const root = join(dataDir, 'profiles');
    this.#root = root;
    this.#keyring = opts.keyring;
    this.#maxBytes = opts.maxBytes;
    // saves a server died in the middle of are removed; their profiles keep the old version
    this.ready = (async () => {
      await mkdir(root, { recursive: true, mode: 0o700 });
      for (const name of await readdir(root)) {
        if (name.startsWith(TMP_PREFIX)) await rm(join(root, name), { force: true });
      }
    })();
  }

  #file(name: string): string {
    return join(this.#root, `${name}${SUFFIX}`);
  }

  async list(): Promise<ProfileInfo[]> {
    await this.ready;
    const out: ProfileInfo[] = [];
    for (const file of (await readdir(this.#root)).sort()) {
      if (!file.endsWith(SUFFIX) || file.startsWith(TMP_PREFIX)) continue;
      const name = file.slice(0, -SUFFIX.length);
      const st = await stat(join(this.#root, file)).catch(() => undefined);
      if (!st) continue;
      out.push({
        name,
        size_bytes: st.size,
        updated_at: st.mtime.toISOString(),
        in_use_by: this.#held.get(name)?.holder ?? null,
      });
    }
    return out;
  }

  /**
   * Holds `name` for an instance being started (`setHolder` names it once it has an id), or a
   * 409 naming the instance that holds it. Synchronous: of two starts at once, one wins.
   */
  acquire(name: string): { setHolder(id: string): void; release(): void } {
    const held = this.#held.get(name);
    if (held) {
      throw serverError('profile_in_use', {
        name: JSON.stringify(name),
        holder: held.holder ?? 'an instance still starting',
      });
    }
    const mine: Held = { holder: undefined };
    this.#held.set(name, mine);
    return {
      setHolder: (id) => {
        mine.holder = id;
      },
      release: () => {
        if (this.#held.get(name) === mine) this.#held.delete(name);
      },
    };
  }

  /** The saved entries of `name`; empty when there is none. A file that does not open is a 422. */
  async load(name: string): Promise<ProfileEntry[]> {
    await this.ready;
    let raw: Buffer;
    try {
      raw = await readFile(this.#file(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const unreadable = (reason: string) =>
      serverError('profile_unreadable', { name: JSON.stringify(name), reason });
    if (raw.length > this.#maxBytes) {
      throw unreadable(`the file is larger than the limit of ${this.#maxBytes} bytes`);
    }
    const nl = raw.indexOf(0x0a);
    let head: { burrow_profile?: number; key_id?: string; iv?: string; tag?: string };
    try {
      head = JSON.parse(raw.toString('utf8', 0, nl)) as typeof head;
    } catch {
      throw unreadable('not a profile file');
    }
    if (nl < 0 || head.burrow_profile !== FORMAT) throw unreadable('not a profile file');
    const key = [this.#keyring.current, ...this.#keyring.old].find((k) => k.id === head.key_id);
    if (!key) throw unreadable(`sealed with key ${head.key_id}, which this server does not have`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.bytes, Buffer.from(head.iv!, 'base64'));
      decipher.setAAD(aad(name));
      decipher.setAuthTag(Buffer.from(head.tag!, 'base64'));
      const plain = Buffer.concat([decipher.update(raw.subarray(nl + 1)), decipher.final()]);
      return unpack(inflateRawSync(plain, { maxOutputLength: this.#maxBytes * 4 }));
    } catch (err) {
      throw unreadable(`it does not decrypt or unpack (${(err as Error).message})`);
    }
  }

  /**
   * Seals `entries` as the new version of `name`: written beside it, then renamed over it. Over
   * the limit, nothing changes and the error says why.
   */
  async save(name: string, entries: readonly ProfileEntry[]): Promise<void> {
    await this.ready;
    const packed = deflateRawSync(pack(entries));
    const iv = randomBytes(12);
    const key = this.#keyring.current;
    const cipher = createCipheriv('aes-256-gcm', key.bytes, iv);
    cipher.setAAD(aad(name));
    const data = Buffer.concat([cipher.update(packed), cipher.final()]);
    const head = JSON.stringify({
      burrow_profile: FORMAT,
      key_id: key.id,
      iv: iv.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
    });
    const file = Buffer.concat([Buffer.from(`${head}\n`), data]);
    if (file.length > this.#maxBytes) {
      throw new Error(
        `profile ${JSON.stringify(name)} is ${file.length} bytes sealed, over the limit of ${this.#maxBytes} (maxProfileBytes): the previous version is kept`,
      );
    }
    const tmp = join(this.#root, `${TMP_PREFIX}${name}-${randomBytes(4).toString('hex')}`);
    try {
      await writeFile(tmp, file, { mode: 0o600, flag: 'wx' });
      await rename(tmp, this.#file(name));
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async delete(name: string): Promise<void> {
    await this.ready;
    const held = this.#held.get(name);
    if (held) {
      throw serverError('profile_in_use', {
        name: JSON.stringify(name),
        holder: held.holder ?? 'an instance still starting',
      });
    }
    try {
      await rm(this.#file(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw serverError('profile_not_found', { name: JSON.stringify(name) });
      }
      throw err;
    }
  }

  /**
   * What an instance started with profile `name` gets: the saved entries, and a save when
   * `saveChanges`. Holds the profile (a 409 when another instance does) until `release`.
   */
  async open(
    name: string,
    saveChanges: boolean,
    log: { warn(obj: object, msg: string): void },
  ): Promise<InstanceProfile & { setHolder(id: string): void }> {
    const lease = this.acquire(name);
    try {
      const entries = await this.load(name);
      return {
        name,
        entries,
        maxBytes: this.#maxBytes,
        ...(saveChanges && {
          save: async (next: ProfileEntry[]) => {
            try {
              await this.save(name, next);
            } catch (err) {
              log.warn({ profile: name, err }, `profile ${name} not saved`);
              throw err;
            }
          },
        }),
        setHolder: lease.setHolder,
        release: lease.release,
      };
    } catch (err) {
      lease.release();
      throw err;
    }
  }
}
