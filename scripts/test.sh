#!/usr/bin/env bash
# Installs the dependencies, builds debugplane with its tests and runs them.
#   scripts/test.sh                              # RelWithDebInfo build, all tests
#   DP_SANITIZE=address,undefined scripts/test.sh  # all tests under ASan + UBSan
#   DP_SANITIZE=thread scripts/test.sh             # TSan: all but the gRPC
#                                                  # and browser areas (below)
#   DP_FUZZ_SECONDS=60 scripts/test.sh             # fuzz each target longer
#                                                  # (default 15 s; 0: no fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
sanitize="${DP_SANITIZE:-}"
build_dir="build/test${sanitize:+-${sanitize//,/-}}"
ctest_args=()
if [[ "$sanitize" == *thread* ]]; then
  # abseil built with TSan (once), so that TSan sees its mutexes and waits.
  ./scripts/build-absl-tsan.sh
  # Debian's libgrpc is not built with TSan, so TSan reports races inside it
  # (its arenas, call batches) that it cannot see synchronized; suppressing
  # them would hide races in our gRPC callbacks too. TSan therefore runs the
  # areas where debugplane's own concurrency lives; the gRPC areas (service,
  # client) and the browser tests (web: they drive the gRPC server through
  # Chromium) run under ASan + UBSan.
  ctest_args+=(-LE "service|client|web")
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDP_SANITIZE="$sanitize" > /dev/null
cmake --build "$build_dir"
(cd "$build_dir" && ctest --output-on-failure --timeout 600 -j2 "${ctest_args[@]}") 2>&1 |
  tee "$build_dir/ctest.log"

# The plain run also fuzzes every parser and the request validation under
# ASan + UBSan for a bounded time (scripts/fuzz.sh; DP_FUZZ_SECONDS each,
# DP_FUZZ_SECONDS=0 skips it).
fuzz_seconds="${DP_FUZZ_SECONDS:-15}"
if [[ -z "$sanitize" && "$fuzz_seconds" != "0" ]]; then
  DP_FUZZ_SECONDS="$fuzz_seconds" ./scripts/fuzz.sh
  # The tests' summary again, as the last line.
  grep -E "tests passed, .* tests failed out of" "$build_dir/ctest.log" | tail -n 1
fi
