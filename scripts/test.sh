#!/usr/bin/env bash
# Installs the dependencies, builds debugplane with its tests and runs them.
#   scripts/test.sh                 # RelWithDebInfo build, all tests
#   DP_SANITIZE=address scripts/test.sh   # the same under a sanitizer
#                                         # (address, undefined or thread)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
sanitize="${DP_SANITIZE:-}"
build_dir="build/test${sanitize:+-$sanitize}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDP_SANITIZE="$sanitize" > /dev/null
cmake --build "$build_dir"
cd "$build_dir"
ctest --output-on-failure --timeout 600 -j2
