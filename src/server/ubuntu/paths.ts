/**
 * The sandbox's view of the file system, applied by the file tools that run in the server
 * process. A path is resolved component by component the way the kernel would resolve it inside
 * the sandbox (symlinks read and followed in sandbox terms, `..` applied after resolution), then
 * mapped to a host path. Writes may land only in a bind (the instance's home and tmp); hidden
 * paths (masked in the sandbox, or not servable from the server: /proc, /sys, /dev) are refused.
 */
import type { Stats } from 'node:fs';
import { lstat, readdir, readlink, realpath } from 'node:fs/promises';
import { posix } from 'node:path';

/** A writable directory of the instance: where it appears in the sandbox and where it lives. */
export interface Bind {
  readonly sandbox: string;
  readonly host: string;
}

export interface ViewLayout {
  /** Sandbox path of the home directory, the base of relative paths. */
  readonly home: string;
  /** The only places writes may land. Host paths must be real paths (no symlinks). */
  readonly binds: readonly Bind[];
  /** Sandbox paths the instance cannot see, or the server cannot serve (e.g. /proc). */
  readonly hidden: readonly string[];
}

/** A refusal or failure the tools report as `error` (HTTP 200). */
export class ToolError extends Error {
  override name = 'ToolError';
}

export interface Resolved {
  /** What the caller asked for, made absolute against home (lexically); used in messages. */
  readonly display: string;
  /** Canonical sandbox path: symlinks resolved as inside the sandbox. */
  readonly path: string;
  /** Where that path lives on the host. */
  readonly host: string;
  /** The bind holding it, when it is writable. */
  readonly bind: Bind | undefined;
  /** lstat of the final path (not followed when resolved with `follow: false`); absent if missing. */
  readonly stat: Stats | undefined;
  /** Whether a symlink in the final component was followed. */
  readonly follow: boolean;
}

type Kind =
  | { kind: 'bind'; bind: Bind; host: string }
  | { kind: 'host'; host: string }
  | { kind: 'virtual' }
  | { kind: 'hidden' };

const MAX_SYMLINKS = 40;

export const isUnder = (path: string, root: string): boolean =>
  path === root || path.startsWith(root === '/' ? '/' : `${root}/`);

const split = (p: string): string[] => p.split('/').filter((c) => c !== '' && c !== '.');

export class SandboxView {
  constructor(readonly layout: ViewLayout) {}

  /** `input` made absolute against home, `.`/`..` folded lexically (for messages only). */
  display(input: string): string {
    return posix.resolve(this.layout.home, input);
  }

  /** Map a canonical sandbox path; the longest bind wins. */
  classify(sp: string): Kind {
    let best: Bind | undefined;
    for (const b of this.layout.binds) {
      if (isUnder(sp, b.sandbox) && (!best || b.sandbox.length > best.sandbox.length)) best = b;
    }
    if (best) {
      const rest = sp.slice(best.sandbox.length);
      return { kind: 'bind', bind: best, host: best.host + rest };
    }
    const hidden = this.layout.hidden.some((h) => isUnder(sp, h));
    if (hidden) {
      // a masked directory that holds a bind's mount point (e.g. /home holding /home/user)
      const holdsBind = this.layout.binds.some((b) => isUnder(b.sandbox, sp) && b.sandbox !== sp);
      return holdsBind ? { kind: 'virtual' } : { kind: 'hidden' };
    }
    return { kind: 'host', host: sp };
  }

  /**
   * Resolve `input` (relative to home) in the sandbox's view. Missing trailing components are
   * allowed (the result has no `stat`); a missing intermediate one is too, lexically.
   */
  async resolve(input: string, opts: { follow?: boolean } = {}): Promise<Resolved> {
    const follow = opts.follow ?? true;
    const display = this.display(input);
    if (input.includes('\0')) throw new ToolError(`Invalid path: ${JSON.stringify(input)}`);
    const pending = split(display);
    let current = '/';
    let exists = true;
    let finalStat: Stats | undefined;
    let hops = 0;
    while (pending.length > 0) {
      const part = pending.shift()!;
      if (part === '..') {
        current = posix.dirname(current);
        finalStat = undefined;
        continue;
      }
      const next = posix.join(current, part);
      if (!exists) {
        current = next;
        continue;
      }
      const kind = this.classify(next);
      if (kind.kind === 'hidden') throw denied(display);
      if (kind.kind === 'virtual') {
        current = next;
        finalStat = undefined;
        continue;
      }
      const st = await lstatOrUndefined(kind.host);
      if (!st) {
        exists = false;
        current = next;
        finalStat = undefined;
        continue;
      }
      if (st.isSymbolicLink() && (follow || pending.length > 0)) {
        if (++hops > MAX_SYMLINKS)
          throw new ToolError(`Too many levels of symbolic links: ${display}`);
        const target = await readlink(kind.host);
        if (target.startsWith('/')) current = '/';
        pending.unshift(...target.split('/').filter((c) => c !== '' && c !== '.'));
        continue;
      }
      current = next;
      finalStat = st;
    }
    const kind = this.classify(current);
    if (kind.kind === 'hidden') throw denied(display);
    if (kind.kind === 'virtual') {
      return {
        display,
        path: current,
        host: current,
        bind: undefined,
        stat: await lstat('/'),
        follow,
      };
    }
    if (exists && finalStat === undefined) finalStat = await lstatOrUndefined(kind.host);
    return {
      display,
      path: current,
      host: kind.host,
      bind: kind.kind === 'bind' ? kind.bind : undefined,
      stat: exists ? finalStat : undefined,
      follow,
    };
  }

  /** Resolve for writing: refuse anything outside the binds, and the bind roots themselves. */
  async resolveWritable(
    input: string,
    opts: { follow?: boolean } = {},
  ): Promise<Resolved & { bind: Bind }> {
    const r = await this.resolve(input, opts);
    if (!r.bind) {
      const where = this.layout.binds.map((b) => b.sandbox).join(' and ');
      throw new ToolError(
        `Access denied: ${r.display} is read-only (writes are allowed only under ${where})`,
      );
    }
    await this.verify(r);
    return r as Resolved & { bind: Bind };
  }

  /**
   * Re-check on the host, just before the I/O, that the deepest existing ancestor of a bind path
   * still lies in its bind (a concurrent `ln -s` inside the sandbox cannot redirect the server).
   */
  async verify(r: Resolved): Promise<void> {
    if (!r.bind) return;
    // a final symlink that is not followed is the object itself: check the directory holding it
    let probe = r.follow || r.host === r.bind.host ? r.host : posix.dirname(r.host);
    for (;;) {
      try {
        const real = await realpath(probe);
        if (!isUnder(real, r.bind.host)) throw denied(r.display);
        return;
      } catch (err) {
        if (err instanceof ToolError) throw err;
        if (probe === r.bind.host || probe === '/') throw denied(r.display);
        probe = posix.dirname(probe);
      }
    }
  }

  /** Names in a sandbox directory as the sandbox sees them (mount points included). */
  async readdir(sandboxDir: string): Promise<string[]> {
    const kind = this.classify(sandboxDir);
    const names = new Set<string>();
    if (kind.kind === 'bind' || kind.kind === 'host') {
      for (const n of await readdir(kind.host)) names.add(n);
    }
    for (const b of this.layout.binds) {
      if (b.sandbox !== sandboxDir && posix.dirname(b.sandbox) === sandboxDir)
        names.add(posix.basename(b.sandbox));
    }
    return [...names].sort();
  }

  /** lstat of a child of a resolved directory, in the sandbox's view (hidden: a bare directory). */
  async lstatChild(
    sandboxDir: string,
    name: string,
  ): Promise<{ path: string; stat: Stats | undefined; hidden: boolean }> {
    const path = posix.join(sandboxDir, name);
    const kind = this.classify(path);
    if (kind.kind === 'hidden' || kind.kind === 'virtual') {
      return { path, stat: await lstat('/'), hidden: kind.kind === 'hidden' };
    }
    return { path, stat: await lstatOrUndefined(kind.host), hidden: false };
  }

  /** True when a host-side recursive walk of `r` would stay inside the sandbox's view. */
  walkable(r: Resolved): boolean {
    if (r.bind) return true;
    const inside = (p: string) => p !== r.path && isUnder(p, r.path);
    return !this.layout.hidden.some(inside) && !this.layout.binds.some((b) => inside(b.sandbox));
  }
}

const denied = (display: string) =>
  new ToolError(`Access denied: ${display} is outside what this instance can access`);

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw err;
  }
}
