/**
 * Python programs the server runs inside an instance (the toolbox, the kernel bridge) reach
 * their process on its stdin, never as files: nothing has to be visible in the instance's view,
 * and nothing the instance can change is read. A program may be several modules, so that each
 * file holds one concern; they travel together in one message and are made importable by name
 * before the last one, the program itself, runs as `__main__`.
 *
 * The message: its byte length in decimal and a newline, then a JSON array of `[name, source]`
 * pairs, dependencies first. The boot program (`python3 -I -c <boot>`) reads exactly that many
 * bytes from stdin's buffer, so whatever follows (the program's own protocol) is left unread.
 */

/** One module of a program: `name` is what the others import it as. */
export interface PythonModule {
  readonly name: string;
  readonly source: string | Buffer;
}

/**
 * The `-c` program that loads a message of `pythonMessage`. `label` is the file name the
 * program's own frames and tracebacks show; it also names the process on its command line.
 */
export function pythonBoot(label: string): string {
  if (!/^[\w.<>-]+$/.test(label)) throw new Error(`pythonBoot: bad label ${label}`);
  return [
    'import sys,json,types',
    'b=sys.stdin.buffer',
    'm=json.loads(b.read(int(b.readline())))',
    'for n,s in m[:-1]:',
    ' d=types.ModuleType(n);sys.modules[n]=d;exec(compile(s,n+".py","exec"),d.__dict__)',
    'g={"__name__":"__main__","__builtins__":__builtins__}',
    `exec(compile(m[-1][1],'${label}','exec'),g)`,
  ].join('\n');
}

/** The message that carries `modules` (the program last) to `pythonBoot`'s loader. */
export function pythonMessage(modules: readonly PythonModule[]): Buffer {
  if (modules.length === 0) throw new Error('pythonMessage: no modules');
  const pairs = modules.map((m) => [m.name, m.source.toString()]);
  const body = Buffer.from(JSON.stringify(pairs));
  return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
}
