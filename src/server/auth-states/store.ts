/**
 * Saved browser auth states, sealed with AES-256-GCM under the server's secret key
 * (src/server/auth-states/secret-key.ts), kept by a backend (backend.ts): by default one file per
 * state under `<dataDir>/auth-states/`, written atomically with mode 0600, so they survive server
 * restarts and a copy of the files alone reveals nothing. This store seals, opens, validates and
 * names; the backend only keeps the sealed records.
 *
 * A record is `{"burrow_auth_state": 2, "key_id", "iv", "tag", "data"}`: `data` is the state's JSON
 * encrypted with a fresh 12-byte IV, the state's id bound in as associated data (a file renamed to
 * another id fails to open). Opening the store reads every record (at once from a backend that
 * can, else before `ready` settles): plaintext files of burrow 0.1 and files sealed by an old key are re-sealed under the current key (the `ready` promise settles
 * when that is done); a file no key opens is kept untouched, listed with a null name, and answers
 * `auth_state_unreadable` until the right key is configured or it is deleted.
 *
 * Every write goes through one queue, so concurrent saves of a state apply in order and memory
 * matches the backend. The store assumes one server process owns the backend's records.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { SerialQueue } from '../../internal/serial.js';
import { serverError } from '../errors.js';
import type { BrowserAuthData } from '../instances/runtime.js';
import {
  FileAuthStateBackend,
  type AuthStateBackend,
  type SealedRecord,
  type SyncLoadable,
} from './backend.js';
import {
  loadKeyring,
  parseKey,
  type Keyring,
  type KeyringOptions,
  type SecretKey,
} from './secret-key.js';

export interface StoredAuthState {
  id: string;
  name: string;
  /** ISO 8601 */
  created_at: string;
  /** ISO 8601 */
  updated_at: string;
  data: BrowserAuthData;
}

interface SealedFile {
  burrow_auth_state: 2;
  key_id: string;
  iv: string;
  tag: string;
  data: string;
}

const ID = /^auth_[0-9a-f]{16}$/;
const FORMAT = 2;
const aad = (id: string) => Buffer.from(`burrow auth state ${id}`);

/** AES-GCM's nonce and tag sizes as sealed (the standard 96-bit nonce, the full 128-bit tag). */
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** `state` sealed under `key`. */
export function seal(state: StoredAuthState, key: SecretKey): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key.bytes, iv);
  cipher.setAAD(aad(state.id));
  const data = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
  const file: SealedFile = {
    burrow_auth_state: FORMAT,
    key_id: key.id,
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    data: data.toString('base64'),
  };
  return JSON.stringify(file);
}

type Opened = { ok: true; state: StoredAuthState; reseal: boolean } | { ok: false; reason: string };

/** The state in a file's text: opened with whichever key sealed it, or why it cannot be. */
function unseal(id: string, text: string, keyring: Keyring): Opened {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'the file is not valid JSON (damaged)' };
  }
  const p = parsed as Partial<SealedFile> & Partial<StoredAuthState>;
  if (p.burrow_auth_state === undefined) {
    // burrow 0.1 wrote states in the clear: read, and re-seal
    if (p.id !== id || typeof p.data !== 'object' || p.data === null) {
      return { ok: false, reason: 'the file is not an auth state' };
    }
    return { ok: true, state: p as StoredAuthState, reseal: true };
  }
  if (p.burrow_auth_state !== FORMAT) {
    return { ok: false, reason: `unknown format ${String(p.burrow_auth_state)} (a newer burrow?)` };
  }
  const key = [keyring.current, ...keyring.old].find((k) => k.id === p.key_id);
  if (!key) {
    return {
      ok: false,
      reason:
        `it was sealed with another secret key (key id ${String(p.key_id)}; this server's is ` +
        `${keyring.current.id}): configure that key, or pass it as an old key`,
    };
  }
  const iv = Buffer.from(typeof p.iv === 'string' ? p.iv : '', 'base64');
  const tag = Buffer.from(typeof p.tag === 'string' ? p.tag : '', 'base64');
  // GCM takes shorter tags and other nonce sizes too; a tag cut to 4 bytes would make a forgery
  // 2^32 tries away. Only what `seal` writes opens.
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) {
    return { ok: false, reason: 'it fails authentication (damaged, or altered)' };
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', key.bytes, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad(id));
    decipher.setAuthTag(tag);
    const plain = Buffer.concat([
      decipher.update(Buffer.from(p.data ?? '', 'base64')),
      decipher.final(),
    ]);
    const state = JSON.parse(plain.toString('utf8')) as StoredAuthState;
    return { ok: true, state, reseal: key !== keyring.current };
  } catch {
    return { ok: false, reason: 'it fails authentication (damaged, or altered)' };
  }
}

export interface AuthStoreOptions extends KeyringOptions {
  /** The keys; default `loadKeyring(dataDir, options)`. */
  keyring?: Keyring;
  /**
   * Only read (tools listing a data dir a server may be using): nothing is created, swept,
   * generated or re-sealed, and every write throws. Without a key, sealed states list with a
   * null name.
   */
  readOnly?: boolean;
  /** Told about states that cannot be read and about migrations; default stderr. */
  warn?: (message: string) => void;
  /**
   * Where the sealed states are kept; default a `FileAuthStateBackend` on
   * `<dataDir>/auth-states/` (read-only when `readOnly`). A backend that cannot `loadSync` is
   * read before `ready` settles: await it before using the store.
   */
  backend?: AuthStateBackend;
  /**
   * Other processes write `backend` too (the nodes of a cluster, on its database): a listing or a
   * choice by name first catches up with what they saved or deleted that this process has not been
   * told yet (`sync`), and a read, replace or delete by id reads an id it does not know, so a state
   * saved through one node is listed, read and replaced through any other right after. Default
   * false.
   */
  shared?: boolean;
  /**
   * States kept at most and their sealed bytes together (config.ts `storeCaps`: a single
   * server's are its one project's; a cluster's store holds every project's, and a project's
   * own caps are checked by http/cluster/keys.ts); past them a save answers 507. Default none.
   */
  caps?: { count: number; bytes: number } | undefined;
  /** On a cluster, the caps of each project's own (checked by http/cluster/keys.ts). */
  projectCaps?: { count: number; bytes: number } | undefined;
}

export class AuthStore {
  readonly #backend: AuthStateBackend;
  readonly #keyring: Keyring;
  readonly #states = new Map<string, StoredAuthState>();
  /** id → why it cannot be read */
  readonly #unreadable = new Map<string, string>();
  /** id → its sealed size, readable or not (what it takes where it is kept) */
  readonly #sizes = new Map<string, number>();
  readonly #caps: { count: number; bytes: number };
  /** Each project's caps (a cluster's; read by http/cluster/keys.ts). */
  readonly projectCaps: { readonly count: number; readonly bytes: number };
  readonly #queue = new SerialQueue();
  readonly #readOnly: boolean;
  readonly #shared: boolean;
  /** Settles once plaintext and old-key files are re-sealed under the current key. */
  readonly ready: Promise<void>;

  constructor(dataDir: string, options: AuthStoreOptions = {}) {
    this.#readOnly = options.readOnly ?? false;
    this.#shared = options.shared ?? false;
    this.#caps = options.caps ?? { count: Infinity, bytes: Infinity };
    this.projectCaps = options.projectCaps ?? { count: Infinity, bytes: Infinity };
    this.#keyring = options.keyring ?? this.#keys(dataDir, options);
    this.#backend =
      options.backend ??
      new FileAuthStateBackend(join(dataDir, 'auth-states'), { readOnly: this.#readOnly });
    const warn = options.warn ?? ((m: string) => console.error(`burrow: ${m}`));
    const backend = this.#backend;
    if ('loadSync' in backend && typeof backend.loadSync === 'function') {
      const reseal = this.#load((backend as SyncLoadable).loadSync(), warn);
      this.ready = this.#migrate(reseal);
    } else {
      this.ready = this.#queue.run(async () => {
        const records: SealedRecord[] = [];
        for (const id of await backend.list()) {
          const sealed = await backend.read(id);
          if (sealed !== undefined) records.push({ id, sealed });
        }
        await this.#resealAll(this.#load(records, warn));
      });
    }
  }

  /** Open `records` into memory; the states to re-seal under the current key. */
  #load(records: readonly SealedRecord[], warn: (message: string) => void): StoredAuthState[] {
    const reseal: StoredAuthState[] = [];
    for (const { id, sealed } of records) {
      if (!ID.test(id)) continue;
      this.#sizes.set(id, sealed.length);
      const opened = unseal(id, sealed, this.#keyring);
      if (!opened.ok) {
        this.#unreadable.set(id, opened.reason);
        continue;
      }
      this.#states.set(id, opened.state);
      if (opened.reseal) reseal.push(opened.state);
    }
    if (this.#unreadable.size > 0) {
      warn(
        `${this.#unreadable.size} auth state(s) cannot be read and are left untouched: ` +
          [...this.#unreadable].map(([id, why]) => `${id}: ${why}`).join('; '),
      );
    }
    return reseal;
  }

  #migrate(reseal: readonly StoredAuthState[]): Promise<void> {
    return this.#queue.run(() => this.#resealAll(reseal));
  }

  /** Re-seal `reseal` under the current key; drop the rotated-out key once nothing needs it. */
  async #resealAll(reseal: readonly StoredAuthState[]): Promise<void> {
    if (this.#readOnly) return;
    for (const state of reseal) await this.#writeFile(state);
    const oldFile = this.#keyring.dataDirOldFile;
    if (oldFile && this.#unreadable.size === 0) {
      // every state is under the current key now: the rotated-out key is no longer needed
      await rm(oldFile, { force: true });
    }
  }

  /** The configured keys; a read-only store without one gets a throwaway key that opens nothing. */
  #keys(dataDir: string, options: AuthStoreOptions): Keyring {
    if (!this.#readOnly) return loadKeyring(dataDir, options);
    try {
      return loadKeyring(dataDir, { ...options, generate: false });
    } catch {
      return {
        current: { ...parseKey(randomBytes(32).toString('hex'), 'none'), source: 'none' },
        old: [],
      };
    }
  }

  /**
   * The keys states are sealed with, for other sealed records of the server (profiles/store.ts):
   * one secret key for everything the server keeps encrypted at rest.
   */
  get keyring(): Keyring {
    return this.#keyring;
  }

  /** The id of the key new writes are sealed with (not secret). */
  get keyId(): string {
    return this.#keyring.current.id;
  }

  /** `{id, name}` of every saved state, oldest first; unreadable ones last, with a null name. */
  list(): { id: string; name: string | null }[] {
    const readable = [...this.#states.values()]
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id))
      .map(({ id, name }) => ({ id, name }) as { id: string; name: string | null });
    const unreadable = [...this.#unreadable.keys()].sort().map((id) => ({ id, name: null }));
    return [...readable, ...unreadable];
  }

  /** The saved state `id`; 404 when there is none, 503 when it cannot be decrypted. */
  get(id: string): StoredAuthState {
    const state = this.#states.get(id);
    if (state) return state;
    const why = this.#unreadable.get(id);
    if (why !== undefined) throw serverError('auth_state_unreadable', { id, reason: why });
    throw serverError('auth_state_not_found', { id: JSON.stringify(id) });
  }

  /** Ids of the readable states named `name`, oldest first. */
  named(name: string): string[] {
    return this.list()
      .filter((s) => s.name === name)
      .map((s) => s.id);
  }

  /** Save a new state under a fresh id; `name` defaults to "default". */
  save(name: string | undefined, data: BrowserAuthData): Promise<{ id: string; name: string }> {
    return this.#queue.run(() => this.#create(name ?? 'default', data));
  }

  /** Replace the data of state `id` (404 if unknown), renaming it when `name` is given. */
  overwrite(
    id: string,
    data: BrowserAuthData,
    name?: string,
  ): Promise<{ id: string; name: string }> {
    return this.#queue.run(async () => {
      await this.#ensure(id);
      return this.#replace(id, data, name);
    });
  }

  /**
   * Save `data` under `name`: replaces the one state of that name (keeping its id), or makes a
   * new one when none has it; 409 listing the ids when several share it. Without a name, a new
   * state named "default".
   */
  upsert(name: string | undefined, data: BrowserAuthData): Promise<{ id: string; name: string }> {
    return this.#queue.run(async () => {
      if (name === undefined) return this.#create('default', data);
      await this.#catchUp();
      const ids = this.named(name);
      if (ids.length > 1) {
        throw serverError('auth_state_name_ambiguous', {
          name: JSON.stringify(name),
          ids: ids.join(', '),
        });
      }
      return ids[0] ? this.#replace(ids[0], data) : this.#create(name, data);
    });
  }

  /** Delete state `id` (readable or not); 404 if unknown. */
  delete(id: string): Promise<void> {
    return this.#queue.run(async () => {
      this.#writable();
      await this.#ensure(id);
      if (!this.#states.has(id) && !this.#unreadable.has(id)) this.get(id); // throws the 404
      await this.#backend.delete(id);
      this.#states.delete(id);
      this.#unreadable.delete(id);
      this.#sizes.delete(id);
    });
  }

  /** How many of the states `ids` (every one when undefined) are kept, and their sealed bytes. */
  usage(ids?: ReadonlySet<string>): { count: number; bytes: number } {
    let count = 0;
    let bytes = 0;
    for (const [id, size] of this.#sizes) {
      if (ids && !ids.has(id)) continue;
      count++;
      bytes += size;
    }
    return { count, bytes };
  }

  /**
   * Read record `id` again from the backend: another process sharing it (a node of the same
   * cluster) wrote or deleted it. Resolves once this store shows what the backend holds.
   */
  refresh(id: string): Promise<void> {
    return this.#queue.run(() => this.#reload(id));
  }

  async #reload(id: string): Promise<void> {
    if (!ID.test(id)) return;
    const sealed = await this.#backend.read(id);
    this.#states.delete(id);
    this.#unreadable.delete(id);
    this.#sizes.delete(id);
    if (sealed === undefined) return;
    this.#sizes.set(id, sealed.length);
    const opened = unseal(id, sealed, this.#keyring);
    if (opened.ok) this.#states.set(id, opened.state);
    else this.#unreadable.set(id, opened.reason);
  }

  /**
   * With a shared backend (`shared`), read what other processes made or deleted since this one
   * was last told: the ids the backend has and this store does not, and the other way round (a
   * state they replaced keeps its id, and reaches this store by their notice). Nothing without.
   */
  sync(): Promise<void> {
    return this.#shared ? this.#queue.run(() => this.#catchUp()) : Promise.resolve();
  }

  async #catchUp(): Promise<void> {
    if (!this.#shared) return;
    const there = new Set(await this.#backend.list());
    const known = new Set([...this.#states.keys(), ...this.#unreadable.keys()]);
    const differ = [
      ...[...there].filter((id) => !known.has(id)),
      ...[...known].filter((id) => !there.has(id)),
    ];
    await Promise.all(differ.map((id) => this.#reload(id)));
  }

  /** With a shared backend, read `id` from it when this store does not know it (yet). */
  async #ensure(id: string): Promise<void> {
    if (this.#shared && !this.#states.has(id) && !this.#unreadable.has(id)) await this.#reload(id);
  }

  /** `get`, after reading `id` from a shared backend when this store does not know it. */
  async fetch(id: string): Promise<StoredAuthState> {
    if (this.#shared) await this.#queue.run(() => this.#ensure(id));
    return this.get(id);
  }

  /**
   * Read every record again (`refresh` for each the backend or this store has): after this
   * process missed what the others told (a cluster node's NOTIFY connection was down).
   */
  async refreshAll(): Promise<void> {
    const ids = new Set([
      ...(await this.#backend.list()),
      ...this.#states.keys(),
      ...this.#unreadable.keys(),
    ]);
    await Promise.all([...ids].map((id) => this.refresh(id)));
  }

  async #create(name: string, data: BrowserAuthData): Promise<{ id: string; name: string }> {
    this.#writable();
    const now = new Date().toISOString();
    const state: StoredAuthState = {
      id: `auth_${randomBytes(8).toString('hex')}`,
      name,
      created_at: now,
      updated_at: now,
      data,
    };
    await this.#writeFile(state, true);
    return { id: state.id, name: state.name };
  }

  async #replace(
    id: string,
    data: BrowserAuthData,
    name?: string,
  ): Promise<{ id: string; name: string }> {
    this.#writable();
    const old = this.get(id);
    const state = { ...old, name: name ?? old.name, updated_at: new Date().toISOString(), data };
    await this.#writeFile(state, true);
    return { id, name: state.name };
  }

  /** A 507 unless state `id` fits the caps at `size` sealed bytes (replacing its old ones). */
  async #room(id: string, size: number): Promise<void> {
    await this.#catchUp(); // what the other nodes saved counts too
    const { count, bytes } = this.usage();
    const old = this.#sizes.get(id);
    const full = (reason: string) => serverError('store_full', { what: 'an auth state', reason });
    if (old === undefined && count >= this.#caps.count) {
      throw full(`${count} auth states are kept, the cap is ${this.#caps.count}`);
    }
    const after = bytes - (old ?? 0) + size;
    if (after > this.#caps.bytes) {
      throw full(
        `with it the auth states would take ${after} bytes, the cap is ${this.#caps.bytes}`,
      );
    }
  }

  #writable(): void {
    if (this.#readOnly) throw new Error('this auth-state store was opened read-only');
  }

  /** `room`: a save of the API's, held to the caps (a re-seal under a new key is not). */
  async #writeFile(state: StoredAuthState, room = false): Promise<void> {
    const sealed = seal(state, this.#keyring.current);
    if (room) await this.#room(state.id, sealed.length);
    await this.#backend.write(state.id, sealed);
    this.#sizes.set(state.id, sealed.length);
    this.#states.set(state.id, state);
    this.#unreadable.delete(state.id);
  }
}
