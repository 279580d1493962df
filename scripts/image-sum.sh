#!/bin/sh
# The hash of the image's definition: what decides whether CI builds and runs the image again
# (.ci/run compares it with .ci/image-verified, the hash of the definition last verified by
# `node --import tsx scripts/image.ts`). The server's own code is not part of it: the image check
# is about the image, and the test suite checks the code on every run.
set -eu
cd "$(dirname "$0")/.."
cat Containerfile compose.yaml .dockerignore scripts/image.ts scripts/setup.sh package-lock.json |
  sha256sum | cut -c1-64
