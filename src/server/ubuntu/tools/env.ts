/**
 * The instance's environment: a base (HOME, PATH, DISPLAY …) plus the variables set through the
 * env API. New processes get `current()`; running bash sessions catch up before their next
 * command through `diff()`.
 */
import { userInfo } from 'node:os';
import { serverError } from '../../errors.js';
import type { EnvCapability } from '../../instances/runtime.js';
import { SANDBOX_PATH } from '../../sandbox/index.js';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export class InstanceEnv implements EnvCapability {
  readonly #base = new Map<string, string>();
  /** Variables set through the API; they override the base. */
  readonly #vars = new Map<string, string>();

  constructor(home: string, tmp: string) {
    const user = safeUserName();
    for (const [k, v] of Object.entries({
      HOME: home,
      PATH: SANDBOX_PATH,
      SHELL: '/bin/bash',
      USER: user,
      LOGNAME: user,
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      TMPDIR: tmp,
      PAGER: 'cat',
      GIT_PAGER: 'cat',
      DEBIAN_FRONTEND: 'noninteractive',
      PYTHONUNBUFFERED: '1',
    })) {
      this.#base.set(k, v);
    }
  }

  /** Set a base variable (e.g. DISPLAY once the display is up). */
  setBase(name: string, value: string): void {
    this.#base.set(name, value);
  }

  /** The full environment a new process of the instance gets. */
  current(): Record<string, string> {
    return Object.fromEntries([...this.#base, ...this.#vars]);
  }

  /** Variables set through the API. */
  async get(): Promise<Record<string, string>> {
    return Object.fromEntries(this.#vars);
  }

  async set(vars: Record<string, string>): Promise<void> {
    for (const [k, v] of Object.entries(vars)) {
      if (!NAME.test(k)) throw serverError('invalid_env_name', { name: JSON.stringify(k) });
      if (v.includes('\0')) throw serverError('invalid_env_value', { name: k });
    }
    for (const [k, v] of Object.entries(vars)) this.#vars.set(k, v);
  }

  /** Remove API-set variables; a base variable reverts to its base value. Unknown keys are ignored. */
  async delete(keys: string[]): Promise<void> {
    for (const k of keys) this.#vars.delete(k);
  }
}

/** Shell statements turning environment `from` into `to` (export changed, unset removed). */
export function envDiff(from: Record<string, string>, to: Record<string, string>): string {
  const out: string[] = [];
  for (const [k, v] of Object.entries(to)) {
    if (from[k] !== v) out.push(`export ${k}=${shellQuote(v)}`);
  }
  for (const k of Object.keys(from)) {
    if (!(k in to)) out.push(`unset ${k}`);
  }
  return out.join('; ');
}

/** Single-quote a string for bash; byte-exact, newlines included. */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

function safeUserName(): string {
  try {
    return userInfo().username;
  } catch {
    return 'user';
  }
}
