/**
 * Host configuration under `/usr` is not readable inside (ISOLATION.md, "The boundary"): the
 * instance gets the host's programs (`/usr`) read-only, but `/usr/local/etc` is the local
 * configuration of hand-installed programs (an `npmrc` with a registry token), which the allow
 * list `/etc` is built from never saw. This test writes a file there on the host before the server
 * starts; the instance's shell cannot read it, list it or write beside it, and the rest of
 * `/usr/local` is still there.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useInstance, useServer } from '../../helpers/use-server.js';

const DIR = '/usr/local/etc';
const name = `burrow-test-${randomBytes(6).toString('hex')}`;
const secret = `token-${randomBytes(12).toString('hex')}`;
let madeDir = false;

// registered before the server's hooks: the file exists when the server plans its mounts, and is
// removed after the server closed
beforeAll(() => {
  madeDir = !existsSync(DIR);
  mkdirSync(DIR, { recursive: true });
  writeFileSync(`${DIR}/${name}`, `${secret}\n`, { mode: 0o644 });
});
afterAll(() => {
  rmSync(`${DIR}/${name}`, { force: true });
  if (madeDir) rmdirSync(DIR);
});

const server = useServer({}, { timeout: 180_000 });
const instance = useInstance(server, 'ubuntu', {}, 180_000);

async function sh(command: string): Promise<string> {
  const res = await server.api(`/v1/instance/${instance.id}/bash`, {
    json: { command, timeout: 30 },
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { output?: string; error?: string };
  return `${body.output ?? ''}${body.error ?? ''}`;
}

describe('/usr/local/etc inside an instance', () => {
  it('is not the host one: its files cannot be read, listed or written', async () => {
    const out = await sh(
      `cat ${DIR}/${name}; echo "cat=$?"; ls -A ${DIR}; echo "ls=$?"; ` +
        `echo x > ${DIR}/planted; echo "write=$?"; test -d /usr/local/bin; echo "bin=$?"`,
    );
    expect(out).not.toContain(secret);
    expect(await sh(`ls -A ${DIR}`)).not.toContain(name);
    expect(out).toMatch(/cat=[1-9]/);
    expect(out).toMatch(/write=[1-9]/);
    expect(out).toContain('bin=0'); // the programs of /usr/local stay
  }, 60_000);
});
