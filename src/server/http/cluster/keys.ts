/**
 * Keys of projects on the HTTP side (the keys themselves: ../../cluster/keys.ts).
 *
 * - **Who asks.** The app's auth hook resolves `x-api-key` to a principal: the server's own key
 *   is the admin, any other key is looked up (`KeyScope.authenticate`). A `preHandler` hook runs
 *   the handler inside that principal (AsyncLocalStorage), so the HTTP routes and the MCP tools,
 *   which call the same handlers, are scoped alike.
 * - **Another project's rows do not exist.** A project key naming an instance or an auth state
 *   of another project (or of the admin) gets the 404 an unknown id gets, same code and body:
 *   a 403 would tell it the id is real. Instance paths are checked before a request is forwarded
 *   to the owner node (which checks again); lists show the project's rows only.
 * - **Profiles are a project's.** A browser profile (a logged-in browser) belongs to the project
 *   of the key that first started with it; a project key lists, starts from and deletes its
 *   own only, by name, and another project's profile of that name does not exist for it
 *   (../../profiles/store.ts). The admin's list shows every project's.
 * - **What stays the admin's.** Keys, and managing uploaded extensions: an extension is code the
 *   operator vets and runs in every project's browsers, holding nobody's data, so one upload
 *   serves all; a project key may start with an extension by id but is refused uploading,
 *   listing or deleting one (403).
 * - **Without a cluster** there is no database for keys: the key routes answer 501 and the
 *   server's own key is the only one, as before. A file of keys on one machine would be a second
 *   way to do the same thing, for a setup that has a single key holder anyway.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { AuthStore } from '../../auth-states/store.js';
import { fromStorageState } from '../../auth-states/storage-state.js';
import { ADMIN, type Principal, type ProjectKeys } from '../../cluster/keys.js';
import { serverError } from '../../errors.js';
import { instanceIdOf } from './forward.js';
import { running } from '../key-handlers.js';
import type { Handlers } from '../handlers.js';

/** The principal of an authenticated request, from the auth hook to the handler. */
const principals = new WeakMap<object, Principal>();

/** What a project key looks like (`ProjectKeys.create`): anything else is not looked up. */
const PROJECT_KEY = /^bkp_[A-Za-z0-9_-]{43}$/;

/** Handlers a project key may not call: what the whole server shares. */
const ADMIN_ONLY: Partial<Record<keyof Handlers, string>> = {
  extensionUpload: 'Uploading extensions',
  extensionList: 'Browser extensions',
  extensionDelete: 'Deleting extensions',
  nodeDrain: 'Draining a node',
};

type AnyInput = {
  params?: { instance_id?: unknown; auth_state_id?: unknown };
  query?: { auth_state_id?: unknown; name?: string };
  body?: unknown;
};

/** Project scoping of a cluster node's API (see the file's comment). */
export class KeyScope {
  readonly #keys: ProjectKeys;
  readonly #auth: AuthStore;

  constructor(keys: ProjectKeys, auth: AuthStore) {
    this.#keys = keys;
    this.#auth = auth;
  }

  /** The keys themselves (their routes' handlers). */
  get keys(): ProjectKeys {
    return this.#keys;
  }

  /** The principal of a key that is not the server's own: a live project key, or undefined. */
  async authenticate(key: string): Promise<Principal | undefined> {
    if (!PROJECT_KEY.test(key)) return undefined;
    return this.#keys.principal(key);
  }

  /**
   * After the auth hook: remembers who `req` is, and refuses a project key an instance path of
   * another project with the unknown id's 404 (before any forwarding).
   */
  async admit(req: FastifyRequest, principal: Principal): Promise<void> {
    principals.set(req.raw, principal);
    if (principal.admin) return;
    // the id the URL names (what forwarding reads) and the one the route was given (what the
    // handler reads): the same once the target has the router's spelling (../limits.ts,
    // `originForm`), both checked all the same
    const ids = new Set<string>();
    const named = req.url.startsWith('/v1/instance/') ? instanceIdOf(req.url) : undefined;
    if (named !== undefined) ids.add(named);
    const routed = (req.params as { instance_id?: unknown } | undefined)?.instance_id;
    if (typeof routed === 'string') ids.add(routed);
    for (const id of ids) await this.#ownInstance(id, principal);
  }

  /** A `preHandler` hook: the handler runs as the request's principal. */
  bind = (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const principal = principals.get(req.raw);
    if (principal) running.run(principal, done);
    else done();
  };

  /** `handlers` scoped to the principal they run for. */
  wrap(handlers: Handlers): Handlers {
    const out: Record<string, unknown> = {};
    for (const [name, handler] of Object.entries(handlers)) {
      const call = handler as (input: unknown) => Promise<unknown>;
      const what = ADMIN_ONLY[name as keyof Handlers];
      out[name] = async (input: AnyInput) => {
        const who = running.getStore();
        if (!who) throw serverError('unauthorized');
        if (who.admin) return call(input);
        if (what) throw serverError('admin_key_required', { what });
        const instanceId = input?.params?.instance_id;
        if (typeof instanceId === 'string') await this.#ownInstance(instanceId, who);
        const stateId = input?.params?.auth_state_id ?? input?.query?.auth_state_id;
        if (typeof stateId === 'string') await this.#ownAuthState(stateId, who);
        return call(input);
      };
    }
    const scoped = out as Handlers;
    const project = () => {
      const who = running.getStore();
      return who && !who.admin ? who.project : undefined;
    };
    const keys = this.#keys;
    return {
      ...scoped,
      start: async (input) => {
        // a profile named is the key's project's own (profiles/store.ts scopes it by project)
        const started = await scoped.start(input);
        const p = project();
        if (p !== undefined) {
          try {
            await keys.claimInstance(started.id, p);
          } catch (err) {
            // an instance nobody of the project could see again: not left running
            await handlers.stop({ params: { instance_id: started.id } } as never).catch(() => {});
            throw err;
          }
        }
        return started;
      },
      listInstances: async (input) => {
        const rows = await scoped.listInstances(input);
        const p = project();
        if (p === undefined) return rows;
        const mine = await keys.instancesOf(p);
        return rows.filter((r) => mine.has(r.id));
      },
      listAuthStates: async (input) => {
        const states = await scoped.listAuthStates(input);
        const p = project();
        if (p === undefined) return states;
        const mine = await keys.authStatesOf(p);
        return states.filter((s) => mine.has(s.id));
      },
      saveAuth: async (input) => {
        const p = project();
        // the state's size is known once saved: a project may pass its bytes by that one state
        if (p !== undefined) await this.#room(await keys.authStatesOf(p), true, 0);
        const saved = await scoped.saveAuth(input);
        if (p !== undefined) await keys.claimAuthState(saved.auth_state_id, p);
        return saved;
      },
      authStateImport: async (input) => {
        const p = project();
        if (p === undefined) return scoped.authStateImport(input);
        // the name picks among the project's own states only: another project's state of the
        // same name is neither replaced nor counted
        const name = input.query.name;
        const mine = await keys.authStatesOf(p);
        await this.#auth.sync(); // what other nodes saved just now counts too
        const same = name === undefined ? [] : this.#auth.named(name).filter((id) => mine.has(id));
        if (same.length > 1) {
          throw serverError('auth_state_name_ambiguous', {
            name: JSON.stringify(name),
            ids: same.join(', '),
          });
        }
        const data = fromStorageState(input.body);
        const removed = same[0] === undefined ? 0 : this.#auth.usage(new Set(same)).bytes;
        await this.#room(
          mine,
          same.length === 0,
          Buffer.byteLength(JSON.stringify(data)) - removed,
        );
        const saved = same[0]
          ? await this.#auth.overwrite(same[0], data)
          : await this.#auth.save(name, data);
        await keys.claimAuthState(saved.id, p);
        return { auth_state_id: saved.id, name: saved.name };
      },
    };
  }

  /**
   * A 507 unless a project holding the states `mine` may keep one more (`adding`), `bytes` larger
   * than what it replaces (the store's own caps, every project's together, come after).
   */
  async #room(mine: ReadonlySet<string>, adding: boolean, bytes: number): Promise<void> {
    await this.#auth.sync();
    const caps = this.#auth.projectCaps;
    const used = this.#auth.usage(mine);
    const full = (reason: string) => serverError('store_full', { what: 'an auth state', reason });
    if (adding && used.count >= caps.count) {
      throw full(`the project keeps ${used.count} auth states, its cap is ${caps.count}`);
    }
    if (used.bytes + bytes > caps.bytes) {
      throw full(
        `with it the project's auth states would take ${used.bytes + bytes} bytes, its cap is ${caps.bytes}`,
      );
    }
  }

  async #ownInstance(id: string, who: Principal & { admin: false }): Promise<void> {
    if ((await this.#keys.instanceProject(id)) !== who.project) {
      throw serverError('instance_not_found', { id });
    }
  }

  async #ownAuthState(id: string, who: Principal & { admin: false }): Promise<void> {
    if ((await this.#keys.authStateProject(id)) !== who.project) {
      throw serverError('auth_state_not_found', { id: JSON.stringify(id) });
    }
  }
}

export { ADMIN };
