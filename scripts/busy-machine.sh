#!/bin/sh
# The timing-sensitive tests (test/busy-machine.list) on a busy machine: `stress-ng --cpu 2` spins
# beside them for as long as they run (installed with apt-get when missing, as root), the tests
# run with the suite's two workers, and when they pass the hash of what passed
# (scripts/busy-sum.sh) is written to .ci/busy-verified: commit it with the tests it verified.
# A test that holds only on an idle machine fails here.
set -eu
cd "$(dirname "$0")/.."
if ! command -v stress-ng >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "busy-machine: stress-ng is missing: apt-get install stress-ng" >&2
    exit 1
  fi
  apt-get update -qq && apt-get install -y -qq stress-ng >/dev/null
fi
files=$(scripts/busy-files.sh)
sum=$(scripts/busy-sum.sh)
stress-ng --cpu 2 --timeout 1800 --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT INT TERM
echo "busy-machine: stress-ng --cpu 2 (pid $hog) beside:" $files
# shellcheck disable=SC2086 # one path a line, no spaces
npx vitest run $files --maxWorkers=2
echo "$sum" > .ci/busy-verified
echo "busy-machine: passed beside a CPU hog; .ci/busy-verified is $sum"
