#!/bin/sh
# The hash of the timing-sensitive tests (test/busy-machine.list, the files it names and the
# `/livez` probes several of them measure with, by their contents): what decides whether CI
# runs them again with a CPU hog beside them (.ci/run compares it with .ci/busy-verified,
# written by scripts/busy-machine.sh when they passed).
set -eu
cd "$(dirname "$0")/.."
files=$(scripts/busy-files.sh)
# shellcheck disable=SC2086 # one path a line, no spaces
cat test/busy-machine.list $files test/helpers/livez-*.ts | sha256sum | cut -c1-64
