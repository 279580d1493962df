#!/bin/sh
# The files test/busy-machine.list names, one path a line: each name must be found exactly once
# under test/ (the list names files, not folders, so it holds when tests move between folders).
set -eu
cd "$(dirname "$0")/.."
grep -v '^#' test/busy-machine.list | grep -v '^[[:space:]]*$' | while read -r name; do
  found=$(find test -name "$name" -type f | sort)
  if [ "$(printf '%s\n' "$found" | grep -c .)" != 1 ]; then
    echo "busy-files: test/busy-machine.list names $name, found ${found:-nowhere}" >&2
    exit 1
  fi
  printf '%s\n' "$found"
done
