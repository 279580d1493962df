#!/bin/sh
# First-run set-up of a checkout, shared by the README's quick start (`npm run demo`, `npm test`)
# and CI (.ci/run). Needs only Node and npm; everything else it checks, and installs when it can:
#
# 1. The Debian packages burrow runs (the list below; src/server/host/requirements.ts says which
#    instance type needs which, and test/unit/setup-script.test.ts keeps the two in step).
#    As root: `apt-get update` and `apt-get install -y` with apt's own progress output.
#    Otherwise: prints the exact command to run and exits 1.
# 2. The npm dependencies and the build: `npm ci` and `npm run build` when node_modules is missing
#    (or with --npm-ci), `npm run build` when dist/ is missing.
#
# Options: --system-only (skip step 2), --npm-ci (always run `npm ci`), --quiet (no "ok" line).
# BURROW_SETUP_ASSUME_MISSING="pkg ..." treats those packages as missing (to test this script).
set -eu
cd "$(dirname "$0")/.."

system_only=0 npm_ci=0 quiet=0
for arg in "$@"; do
  case "$arg" in
    --system-only) system_only=1 ;;
    --npm-ci) npm_ci=1 ;;
    --quiet) quiet=1 ;;
    -h | --help)
      sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "setup: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

say() { printf 'setup: %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }
py() { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "$1" >/dev/null 2>&1; }

missing=""
need() {
  case " $missing " in *" $1 "*) ;; *) missing="${missing:+$missing }$1" ;; esac
}

# Each line: the package, then the check that says it is installed.
[ -x "${BURROW_CHROMIUM:-/usr/lib/chromium/chromium}" ] || need chromium
[ -x "${BURROW_XVFB:-/usr/bin/Xvfb}" ] || need xvfb
[ -x /usr/bin/xdotool ] || need xdotool
[ -x "${BURROW_X11VNC:-/usr/bin/x11vnc}" ] || need x11vnc
[ -x /usr/bin/bwrap ] || [ -x /bin/bwrap ] || need bubblewrap
{ have nsenter && have unshare && have setpriv; } || need util-linux
[ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || have ip || need iproute2
[ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || need e2fsprogs
have mount || need mount
py 'import ipykernel' || need python3-ipykernel
py 'import jupyter_client' || need python3-jupyter-client
py 'import pyflakes' || need python3-pyflakes
[ -x /usr/bin/ffmpeg ] || need ffmpeg
# the tests attack instances with curl, serve TLS made with openssl, and look for processes
have curl || need curl
have openssl || need openssl
have pgrep || need procps
# the upstream-proxy tests start real proxies on loopback: HTTP with basic auth, SOCKS5 with a password
[ -x /usr/bin/tinyproxy ] || need tinyproxy
[ -x /usr/bin/microsocks ] || need microsocks
# the cluster tests start a PostgreSQL 15 of their own (initdb + pg_ctl in a temp directory)
[ -x /usr/lib/postgresql/15/bin/initdb ] || need postgresql
# the unprivileged tests give their normal user a subordinate uid range (newuidmap) and
# simulate a container's root with capabilities dropped (capsh)
have newuidmap || need uidmap
[ -x /usr/sbin/capsh ] || have capsh || need libcap2-bin

for pkg in ${BURROW_SETUP_ASSUME_MISSING:-}; do need "$pkg"; done

if [ -n "$missing" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    say "installing Debian packages: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086 # one word per package
    apt-get install -y $missing
  else
    say "missing Debian packages: $missing"
    say "install them as root, then run this again:"
    echo
    echo "  sudo apt-get install -y $missing"
    echo
    exit 1
  fi
elif [ "$quiet" -eq 0 ]; then
  say "every Debian package burrow uses is installed"
fi

[ "$system_only" -eq 1 ] && exit 0

# playwright-core and puppeteer-core never download browsers: burrow uses Debian's Chromium.
export PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# the build is a step of its own: the package has no install-time script (a `prepare` would run,
# or be flagged, in every project that installs the tarball; `prepack` builds for `npm pack`)
built=0
if [ "$npm_ci" -eq 1 ] || [ ! -d node_modules ]; then
  say "installing npm dependencies (npm ci)"
  npm ci --no-fund --no-audit
  say "building dist/"
  npm run -s build
  built=1
fi
if [ "$built" -eq 0 ] && [ ! -f dist/src/cli/main.js ]; then
  say "building dist/"
  npm run -s build
fi
