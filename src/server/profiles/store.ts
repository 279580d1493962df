/**
 * Persistent browser profiles: a Chromium user-data directory as an instance's Chromium left it
 * (cookies, localStorage, IndexedDB, service workers, cache, extension state), sealed with
 * AES-256-GCM under the server's secret key (the auth states' keyring, auth-states/secret-key.ts)
 * and kept by a backend (backend.ts): files under `<dataDir>/profiles/` on a single server, a
 * table of the cluster's database on a node (../cluster/profile-backend.ts). Sealed bytes are a
 * first line of JSON (format, key id, IV, tag, and the archive's length once opened, which a
 * restore is charged before opening it; absent in profiles saved before it was written) and
 * then the ciphertext of the deflated archive (pack.ts), sealed as a stream (seal.ts); the
 * profile's name, and its project's, are bound in as associated data, so bytes moved to another
 * name or project do not open. The backend never sees plaintext.
 *
 * **Memory.** A profile read back at a save, or opened at a start, is held in the server's
 * memory until it is sealed, or until the instance's disk has it: both are charged to one budget
 * (`maxProfileBytesReadBack`) before they are held, and wait their turn in it (a start that
 * waits too long is a 503). A running instance's server keeps no copy of its profile.
 *
 * A profile is held by one live instance at a time (`acquire`): a second start naming it answers
 * 409 with the holder's id. A save replaces the sealed bytes whole, so a profile is always the
 * old version or the new one, never half of either; a save over the size limit keeps the old
 * version.
 *
 * **Projects.** Each profile is of one project (the key's that first started with it) or the
 * admin's (`null`); names are per project, and a project's key sees, starts and deletes its own
 * only: another project's profile of the same name does not exist for it. The admin's list
 * shows every project's (with `project`); its starts and deletes name its own.
 */
import { randomBytes } from 'node:crypto';
import type { ProfileInfo } from '../../api/index.js';
import { ByteBudget } from '../../internal/byte-budget.js';
import type { Keyring } from '../auth-states/secret-key.js';
import { serverError } from '../errors.js';
import type { InstanceProfile, ProfileEntry } from '../instances/runtime.js';
import { FileProfileBackend, type ProfileBackend, type ProfileHold } from './backend.js';
import { seal, unseal } from './seal.js';
import { packedLength } from './pack.js';

const FORMAT = 1;
/** The associated data: the admin's profiles as before projects, a project's with its name. */
const aad = (project: string | null, name: string) =>
  Buffer.from(project === null ? `burrow profile ${name}` : `burrow profile ${project}/${name}`);

/** A name as the API takes it: letters, digits, `.`, `_`, `-`; not starting with a dot. */
export const PROFILE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/;

/**
 * What is kept at most: profiles of one project (on a single server, of the server) and their
 * sealed bytes, and the sealed bytes of every project's together.
 */
export interface ProfileCaps {
  count: number;
  bytes: number;
  totalBytes: number;
}

/**
 * How long a save waits for its turn in the budget of profiles read back at once, before it gives
 * up (the previous version is kept): the saves before it are read, sealed and written in seconds.
 */
const READ_BACK_WAIT_MS = 120_000;

export class ProfileStore {
  readonly #backend: ProfileBackend;
  readonly #keyring: Keyring;
  readonly #maxBytes: number;
  readonly #caps: ProfileCaps;
  /** Bytes of profiles read back from stopping instances that the server holds at once. */
  readonly #readBack: ByteBudget;
  readonly ready: Promise<void>;

  constructor(
    dataDir: string,
    opts: {
      keyring: Keyring;
      maxBytes: number;
      caps?: ProfileCaps | undefined;
      backend?: ProfileBackend | undefined;
      /** Bytes of profiles being read back at once, every instance's together (default 1 GiB). */
      readBackBytes?: number | undefined;
    },
  ) {
    const backend = opts.backend ?? new FileProfileBackend(dataDir);
    this.#backend = backend;
    this.#keyring = opts.keyring;
    this.#maxBytes = opts.maxBytes;
    this.#caps = opts.caps ?? { count: Infinity, bytes: Infinity, totalBytes: Infinity };
    this.#readBack = new ByteBudget(opts.readBackBytes ?? 2 ** 30);
    this.ready = backend instanceof FileProfileBackend ? backend.ready : Promise.resolve();
  }

  /**
   * The saved profiles of `project` (`null`: the admin's); every project's when undefined (the
   * admin's list), each of a project naming it.
   */
  async list(project?: string | null): Promise<ProfileInfo[]> {
    await this.ready;
    const rows = await this.#backend.list(project);
    return rows.map(({ project: p, ...row }) => ({
      ...row,
      ...(project === undefined && p !== null && { project: p }),
    }));
  }

  /**
   * Holds `name` for an instance being started (`setHolder` names it once it has an id), or a
   * 409 naming the instance that holds it. Of two starts at once, one wins.
   */
  acquire(project: string | null, name: string): Promise<ProfileHold> {
    return this.#backend.acquire(project, name);
  }

  /**
   * The saved entries of `name`; empty when there is none. Bytes that do not open are a 422.
   * `charge` is told the bytes it will hold (the sealed file and what it opens into) before it
   * opens it.
   */
  async load(
    project: string | null,
    name: string,
    charge: (bytes: number) => Promise<void> = async () => {},
  ): Promise<ProfileEntry[]> {
    await this.ready;
    const raw = await this.#backend.read(project, name);
    if (raw === undefined) return [];
    const unreadable = (reason: string) =>
      serverError('profile_unreadable', { name: JSON.stringify(name), reason });
    if (raw.length > this.#maxBytes) {
      throw unreadable(`the file is larger than the limit of ${this.#maxBytes} bytes`);
    }
    const nl = raw.indexOf(0x0a);
    let head: {
      burrow_profile?: number;
      key_id?: string;
      iv?: string;
      tag?: string;
      packed?: number;
    };
    try {
      head = JSON.parse(raw.toString('utf8', 0, nl)) as typeof head;
    } catch {
      throw unreadable('not a profile file');
    }
    if (nl < 0 || head.burrow_profile !== FORMAT) throw unreadable('not a profile file');
    const key = [this.#keyring.current, ...this.#keyring.old].find((k) => k.id === head.key_id);
    if (!key) throw unreadable(`sealed with key ${head.key_id}, which this server does not have`);
    // what it opens into is bounded before it is opened: by the length its save recorded (a
    // profile saved before that was recorded: by the most a profile may open into)
    const most = this.#maxBytes * 4;
    const packed = head.packed;
    const opensInto = Number.isSafeInteger(packed) && packed! >= 0 ? Math.min(packed!, most) : most;
    await charge(raw.length + opensInto);
    let entries: ProfileEntry[];
    try {
      const cipherKey = {
        key: key.bytes,
        iv: Buffer.from(head.iv!, 'base64'),
        aad: aad(project, name),
        tag: Buffer.from(head.tag!, 'base64'),
      };
      entries = await unseal(raw.subarray(nl + 1), cipherKey, opensInto);
    } catch (err) {
      throw unreadable(`it does not decrypt or unpack (${(err as Error).message})`);
    }
    return entries;
  }

  /**
   * Seals `entries` as the new version of `name`, for the instance holding it (`hold`). Over
   * the limit, nothing changes and the error says why.
   */
  async save(
    project: string | null,
    name: string,
    entries: readonly ProfileEntry[],
    hold: ProfileHold,
  ): Promise<void> {
    await this.ready;
    const iv = randomBytes(12);
    const key = this.#keyring.current;
    const tooBig = (size: string) =>
      new Error(
        `profile ${JSON.stringify(name)} is ${size} bytes sealed, over the limit of ${this.#maxBytes} (maxProfileBytes): the previous version is kept`,
      );
    const body = await seal(
      entries,
      { key: key.bytes, iv, aad: aad(project, name) },
      this.#maxBytes,
      () => tooBig('more than'),
    );
    const head = JSON.stringify({
      burrow_profile: FORMAT,
      key_id: key.id,
      iv: iv.toString('base64'),
      tag: body.tag.toString('base64'),
      packed: packedLength(entries),
    });
    const sealed = [Buffer.from(`${head}\n`), ...body.parts];
    const size = sealed[0]!.length + body.bytes;
    if (size > this.#maxBytes) throw tooBig(String(size));
    await this.#room(project, name, size);
    await this.#backend.write(project, name, sealed, hold);
  }

  /**
   * A 507 unless `name` of `project` fits the caps at `size` sealed bytes (a new name counts one
   * more profile; a saved one is replaced, its old bytes freed). At a start, `size` 0: only the
   * count, as the bytes are known at the save.
   */
  async #room(project: string | null, name: string, size: number): Promise<void> {
    const all = await this.#backend.list();
    const others = all.filter((r) => r.project !== project || r.name !== name);
    const mine = others.filter((r) => r.project === project);
    const sum = (rows: typeof all) => rows.reduce((n, r) => n + r.size_bytes, 0) + size;
    const full = (reason: string) =>
      serverError('store_full', { what: `profile ${JSON.stringify(name)}`, reason });
    const isNew = others.length === all.length;
    if (isNew && mine.length >= this.#caps.count) {
      throw full(
        `${mine.length} profiles are kept, the cap (maxProfilesPerProject) is ${this.#caps.count}`,
      );
    }
    if (size === 0) return;
    if (sum(mine) > this.#caps.bytes) {
      throw full(
        `with it the profiles would take ${sum(mine)} bytes, the cap (maxProfileBytesPerProject) is ${this.#caps.bytes}`,
      );
    }
    if (sum(others) > this.#caps.totalBytes) {
      throw full(
        `with it every project's profiles would take ${sum(others)} bytes, the cap (maxProfileBytesTotal) is ${this.#caps.totalBytes}`,
      );
    }
  }

  async delete(project: string | null, name: string): Promise<void> {
    await this.ready;
    await this.#backend.delete(project, name);
  }

  /**
   * What an instance started with profile `name` of `project` gets: the saved entries, and a
   * save when `saveChanges`. Holds the profile (a 409 when another instance does) until
   * `release`.
   */
  async open(
    project: string | null,
    name: string,
    saveChanges: boolean,
    log: { warn(obj: object, msg: string): void },
  ): Promise<InstanceProfile & { setHolder(id: string): void }> {
    await this.ready;
    const hold = await this.acquire(project, name);
    /** What the restore holds of the read-back budget, given back once its files are seeded. */
    let giveBack = () => {};
    try {
      if (saveChanges) await this.#room(project, name, 0); // a new one past the count: refused now
      let entries: readonly ProfileEntry[] | undefined = await this.load(
        project,
        name,
        async (bytes) => {
          giveBack = await this.#readBack.take(bytes, READ_BACK_WAIT_MS, () => busy(name));
        },
      );
      return {
        name,
        restore: async (use) => {
          const saved = entries ?? [];
          entries = undefined; // the instance's disk has them from here on; the server need not
          try {
            return await use(saved);
          } finally {
            giveBack();
          }
        },
        maxBytes: this.#maxBytes,
        ...(saveChanges && {
          save: async (read) => {
            let giveBack = () => {};
            try {
              // held from before the files are read until their sealed copy is written
              const next = await read(async (bytes) => {
                giveBack = await this.#readBack.take(
                  bytes,
                  READ_BACK_WAIT_MS,
                  () =>
                    new Error(
                      `waited ${READ_BACK_WAIT_MS / 1000} s for other profiles being saved to leave room (maxProfileBytesReadBack, ${this.#readBack.limit} bytes)`,
                    ),
                );
              });
              await this.save(project, name, next, hold);
            } catch (err) {
              log.warn({ profile: name, project, err }, `profile ${name} not saved`);
              throw err;
            } finally {
              giveBack();
            }
          },
        }),
        setHolder: (id) => hold.setHolder(id),
        release: () => {
          entries = undefined;
          giveBack();
          hold.release();
        },
      };
    } catch (err) {
      giveBack();
      hold.release();
      throw err;
    }
  }
}

/** The answer to a restore that waited too long for room in the read-back budget. */
const busy = (name: string) =>
  serverError('profile_restore_busy', {
    name: JSON.stringify(name),
    seconds: READ_BACK_WAIT_MS / 1000,
  });
