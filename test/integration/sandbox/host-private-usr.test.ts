/**
 * Host configuration under `/usr` is not readable inside (ISOLATION.md, "The boundary"): the
 * instance gets the host's programs (`/usr`) read-only, but `/usr/local/etc` is the local
 * configuration of hand-installed programs (an `npmrc` with a registry token), which the allow
 * list `/etc` is built from never saw. This test writes a file there on the host, in a directory
 * made after the server started where it can (the server masks what appeared since at the next
 * start); the instance's shell cannot read it, list it or write beside it, and the rest of
 * `/usr/local` is still there.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useServer } from '../../helpers/use-server.js';

const DIR = '/usr/local/etc';
const name = `burrow-test-${randomBytes(6).toString('hex')}`;
const secret = `token-${randomBytes(12).toString('hex')}`;
const existed = existsSync(DIR);
/** Whether the server starts without the directory (the host's is empty: set aside meanwhile). */
let absentAtStart = false;

// registered before the server's hooks: what the server sees when it plans its mounts
beforeAll(() => {
  if (existed && readdirSync(DIR).length === 0) rmdirSync(DIR);
  absentAtStart = !existsSync(DIR);
});
afterAll(() => {
  rmSync(`${DIR}/${name}`, { force: true });
  if (!existed) rmdirSync(DIR);
  else mkdirSync(DIR, { recursive: true });
});

const server = useServer({}, { timeout: 180_000 });

describe('/usr/local/etc inside an instance', () => {
  it('is not the host one, even made after the server started: its files cannot be read, listed or written', async () => {
    // the host's directory and a file in it, made once the server runs (where the host's
    // directory could be set aside; else it was there from the start, holding files)
    mkdirSync(DIR, { recursive: true });
    writeFileSync(`${DIR}/${name}`, `${secret}\n`, { mode: 0o644 });
    const started = await server.api('/v1/start', { json: { instance_type: 'ubuntu' } });
    expect(started.status).toBe(200);
    const { id } = (await started.json()) as { id: string };
    const sh = async (command: string) => {
      const res = await server.api(`/v1/instance/${id}/bash`, { json: { command, timeout: 30 } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { output?: string; error?: string };
      return `${body.output ?? ''}${body.error ?? ''}`;
    };
    const out = await sh(
      `cat ${DIR}/${name}; echo "cat=$?"; ls -A ${DIR}; echo "ls=$?"; ` +
        `echo x > ${DIR}/planted; echo "write=$?"; test -d /usr/local/bin; echo "bin=$?"`,
    );
    console.log({ absentAtStart });
    expect(out).not.toContain(secret);
    expect(await sh(`ls -A ${DIR}`)).not.toContain(name);
    expect(out).toMatch(/cat=[1-9]/);
    expect(out).toMatch(/write=[1-9]/);
    expect(out).toContain('bin=0'); // the programs of /usr/local stay
    await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  }, 180_000);
});
