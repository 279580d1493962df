/**
 * Run by test/integration/sandbox/unprivileged.test.ts as a normal user (`runuser -u burrow-ci`), from the
 * repository root with `node --import tsx`: the embedded default with no flag, an ubuntu instance's
 * bash, and the attacks that apply to an unprivileged server. Prints one JSON line of findings on
 * stdout; the test asserts them. Nothing here asserts: a finding is what happened.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Burrow, embeddedServer, openSession } from 'burrow-sandbox';

const found: Record<string, unknown> = { uid: process.getuid?.() };

const status = (pid: number, field: string) =>
  Number(
    new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1],
  );

/** Host pids of an instance's pid 1 (its command line names the instance) and all below it. */
function instanceProcs(id: string): number[] {
  const init = readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .find((n) => {
      try {
        // (its bubblewrap, outside the pid namespace, names it too)
        return (
          readFileSync(`/proc/${n}/comm`, 'utf8') === 'sh\n' &&
          readFileSync(`/proc/${n}/cmdline`, 'utf8').includes(`burrow-init-${id}`)
        );
      } catch {
        return false;
      }
    });
  const out: number[] = [];
  const walk = (pid: number) => {
    out.push(pid);
    let kids = '';
    try {
      kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    } catch {
      return;
    }
    for (const kid of kids.split(' ').filter(Boolean)) walk(Number(kid));
  };
  if (init) walk(Number(init));
  return out;
}

/**
 * `command` run as an instance's user that left all its namespaces but the outer user one: in the
 * host's pid and mount namespaces, as the uid the instance's processes have on the host (1000 of
 * the user namespace its pid 1's parent is in). What such an escape could reach with that uid.
 */
function escaped(init: number, command: string): string {
  const outer = status(init, 'PPid');
  const r = spawnSync(
    'nsenter',
    [
      '--preserve-credentials',
      `--user=/proc/${outer}/ns/user`,
      '--',
      'setpriv',
      '--reuid=1000',
      '--regid=1000',
      '--clear-groups',
      '--',
      'sh',
      '-c',
      command,
    ],
    { encoding: 'utf8', timeout: 20_000 },
  );
  return `${r.stdout}${r.stderr}`;
}
const site = createServer((_req, res) => res.end('host secret'));
await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
const hostPort = (site.address() as AddressInfo).port;
const lease = await embeddedServer();
const client = new Burrow({ baseUrl: lease.url, apiKey: lease.apiKey });
try {
  // the bridge on the embedded default, a few times: the first result is the page, all are timed
  const opens: number[] = [];
  let kept: [string, string, string] = ['', '', ''];
  let last = '';
  for (let i = 0; i < Number(process.env.OPENS ?? 3); i++) {
    const t0 = performance.now();
    await using session = await openSession();
    opens.push(Math.round(performance.now() - t0));
    last = session.instance.id;
    if (i > 0) continue;
    await session.page.goto('data:text/html,<title>local page</title><p>hi</p>');
    found.title = await session.page.title();
    found.hostPage = await session.page.goto(`http://127.0.0.1:${hostPort}/`).then(
      async (r) => `loaded ${r?.status()} ${await session.page.content()}`,
      (e: Error) => `failed ${e.message.split('\n')[0]}`,
    );
    found.browserLimits = (await client.instances.get(session.instance.id)).limits;
    // a download and a recording, read by the server out of the instance's disk (a tmpfs in its
    // own mount namespace at the unprivileged level)
    await session.recording.start();
    const text = `download ${Date.now()}`;
    await session.page.setContent(
      `<a id="d" download="notes.txt" href="data:text/plain,${encodeURIComponent(text)}">d</a>`,
    );
    await Promise.all([session.page.waitForEvent('download'), session.page.click('#d')]);
    await new Promise((r) => setTimeout(r, 1500));
    const clip = await session.recording.stop();
    const [download] = await session.downloads.list();
    const res = await client.downloads.get(session.instance.id, download?.id ?? 'none');
    const chunks: Buffer[] = [];
    for await (const c of res.body) chunks.push(c as Buffer);
    found.download = Buffer.concat(chunks).toString() === text ? 'same bytes' : 'different';
    found.recording = clip.state;
    kept = [session.instance.id, download?.id ?? 'none', text];
  }
  found.opens = opens;
  // the last session's teardown, as it goes on after its stop answered: none of its processes
  // may end up a zombie of the host's init (pid 1 of the instance then cannot end until that
  // reaps it, which took 1-2 s here), and how long until its pid 1 is gone
  const t1 = performance.now();
  let orphans = 0;
  const initAlive = () =>
    readdirSync('/proc').some((n) => {
      try {
        return (
          readFileSync(`/proc/${n}/cmdline`, 'utf8').startsWith('/bin/sh\0') &&
          readFileSync(`/proc/${n}/cmdline`, 'utf8').includes(`burrow-init-${last}`)
        );
      } catch {
        return false;
      }
    });
  while (performance.now() - t1 < 5000) {
    for (const n of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        const stat = readFileSync(`/proc/${n}/stat`, 'utf8');
        const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (state === 'Z' && ppid === '1' && status(Number(n), 'Uid') === process.getuid?.()) {
          orphans++;
        }
      } catch {
        /* gone */
      }
    }
    if (!initAlive()) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  found.zombiesOfHostInit = orphans;
  found.teardownMs = Math.round(performance.now() - t1);
  // copied out at stop, while the disk was there: still served after the instance is gone
  const after = await client.downloads.get(kept[0], kept[1]);
  const rest: Buffer[] = [];
  for await (const c of after.body) rest.push(c as Buffer);
  found.downloadAfterStop = Buffer.concat(rest).toString() === kept[2] ? 'same bytes' : 'different';

  // an ubuntu instance: its bash, and what it can reach
  const ubuntu = await client.instances.start({
    instance_type: 'ubuntu',
    blocked_domains: ['blocked.example'],
  });
  const other = await client.instances.start({ instance_type: 'ubuntu' });
  const sh = async (id: string, command: string) => {
    const r = await client.instance.bash(id, { command, timeout: 60 });
    return `${r.output ?? ''}${r.error ?? ''}`;
  };
  // the other instance's processes, as host pids and as its own pid namespace numbers them
  const otherPid = (await sh(other.id, 'sleep 300 & echo $!')).trim();
  const id = ubuntu.id;
  found.limits = ubuntu.limits;
  found.bash = await sh(id, 'echo hello from $(id -un) $(id -u); hostname');
  found.fds = await sh(
    id,
    'ls /proc/self/fd | tr "\\n" " "; echo; for f in /proc/self/fd/*; do readlink $f; done',
  );
  found.setns = await sh(
    id,
    // try to enter whatever descriptor was inherited (setns is 308 on x86_64, 268 on arm64)
    `perl -e 'my $n = $^O eq "linux" && \`uname -m\` =~ /aarch64/ ? 268 : 308; opendir(my $d, "/proc/self/fd"); for my $f (grep { /^\\d+$/ && $_ > 2 } readdir $d) { my $r = syscall($n, 0 + $f, 0); print "fd $f setns=$r\\n" if $r == 0 }; print "done\\n"'`,
  );
  // every namespace descriptor any process of the instance holds (its own to take by /proc/N/fd)
  found.nsFdsAnywhere = await sh(
    id,
    'for d in /proc/[0-9]*/fd/*; do l=$(readlink "$d" 2>/dev/null) && echo "$d $l"; done | grep -E "(user|pid|net|mnt|ipc|uts|cgroup|time):\\[" || true',
  );
  found.hostTmp = await sh(id, 'ls -a /tmp; ls /tmp/bci-host-marker 2>&1; ls / ');
  found.procs = await sh(id, 'ls /proc | grep -E "^[0-9]+$" | tr "\\n" " "');
  found.otherPid = otherPid;
  // seen from the host: the uids the two instances' processes run as
  const mine = instanceProcs(id);
  const theirs = instanceProcs(other.id);
  found.hostUids = [
    [...new Set(mine.map((pid) => status(pid, 'Uid')))],
    [...new Set(theirs.map((pid) => status(pid, 'Uid')))],
  ];
  if (process.env.ESCAPE && mine[0] && theirs[0]) {
    // signal the other instance's pid 1 (kill, then a pidfd: pidfd_open 434, send_signal 424),
    // the server's process, read the other's environment and files, the server user's home
    const target = theirs[0];
    found.escaped = escaped(
      mine[0],
      `kill -0 ${target} 2>/dev/null; echo "kill other $?"; kill -0 ${process.pid} 2>/dev/null; echo "kill server $?"; ` +
        `perl -e '$! = 0; my $fd = syscall(434, ${target}, 0); my $r = syscall(424, $fd, 0, 0, 0); print "pidfd other $r ", 0 + $!, "\\n"'; ` +
        `cat /proc/${target}/environ >/dev/null 2>&1; echo "environ other $?"; ls /proc/${target}/root/home/user >/dev/null 2>&1; echo "files other $?"; ` +
        `ls "${process.env.HOME}" >/dev/null 2>&1; echo "server home $?"`,
    );
  }
  found.seeOther = await sh(id, `cat /proc/${otherPid}/cmdline 2>&1 | tr "\\0" " "; echo; ps ax`);
  found.unshare = await sh(id, 'unshare -m true 2>&1; echo "exit $?"');
  found.mount = await sh(id, 'mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>&1; echo "exit $?"');
  found.ptrace = await sh(
    id,
    // PTRACE_ATTACH (16) on pid 1 of the instance: refused by seccomp before any permission check
    `perl -e '$! = 0; my $r = syscall(101, 16, 1, 0, 0); print "ptrace=$r errno=", 0 + $!, "\\n"'`,
  );
  found.hostPort = await sh(
    id,
    `curl -sS -m 5 --noproxy '*' http://127.0.0.1:${hostPort}/ 2>&1; echo; curl -sS -m 5 -o /dev/null -w '%{http_code}' http://127.0.0.1:${hostPort}/ 2>&1`,
  );
  found.blocked = await sh(
    id,
    "curl -sS -m 5 -o /dev/null -w '%{http_code}' http://blocked.example/ 2>&1",
  );
  found.apiPort = await sh(
    id,
    `curl -sS -m 5 --noproxy '' -x http://127.0.0.1:3128 -o /dev/null -w '%{http_code}' http://127.0.0.1:${new URL(lease.url).port}/v1/instances 2>&1`,
  );
  found.quota = await sh(id, 'df -B1 --output=size,target /home/user /tmp | tail -n +2');
  // an upload (the toolbox writes it inside), and who owns it there
  await client.instance.upload(id, { file: Buffer.from('uploaded bytes'), path: '/tmp/up.txt' });
  found.upload = await sh(id, 'cat /tmp/up.txt; echo; stat -c %U /tmp/up.txt');
  const pause = await client.instances.pause(id).then(
    () => ({ status: 200 }),
    (e: { status?: number; message?: string }) => ({ status: e.status, message: e.message }),
  );
  found.pause = pause;
  await client.instances.stop(id);
  await client.instances.stop(other.id);
} catch (err) {
  found.error = String((err as Error).stack ?? err);
} finally {
  await lease.release();
  site.close();
}
console.log(JSON.stringify(found));
