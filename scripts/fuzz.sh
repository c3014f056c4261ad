#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzzer.cc) with clang,
# ASan and UBSan, all of debugplane's code instrumented so that coverage
# guides the fuzzers, and runs each for a bounded time. Fails on any crash,
# sanitizer report, leak, timeout or out-of-memory; prints the runs of each.
#   scripts/fuzz.sh                       # every fuzzer, 20 s each
#   DP_FUZZ_SECONDS=60 scripts/fuzz.sh    # longer
#   scripts/fuzz.sh request_json_fuzzer   # only the named fuzzers
# The corpus of each fuzzer is kept in build/fuzz/corpus/<fuzzer> (seeded
# from tests/data where that has matching files), so later runs go on from
# what earlier ones found; a crashing input is written to
# build/fuzz/artifacts/. Needs clang (Debian: clang, with libclang-rt).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${DP_FUZZ_SECONDS:-20}"
build_dir="${DP_FUZZ_BUILD_DIR:-build/fuzz}"
jobs="${DP_FUZZ_BUILD_JOBS:-2}"

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ not found (Debian: apt-get install clang)" >&2
  exit 2
fi

if (($# > 0)); then
  fuzzers=("$@")
else
  fuzzers=()
  for source in fuzz/*_fuzzer.cc; do
    name="$(basename "$source" .cc)"
    fuzzers+=("$name")
  done
fi

# -fsanitize=fuzzer-no-link: the libraries get coverage instrumentation; the
# fuzzer targets add -fsanitize=fuzzer themselves (CMakeLists.txt, DP_FUZZ).
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDP_FUZZ=ON -DDP_BUILD_TESTS=OFF -DDP_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  > /dev/null
cmake --build "$build_dir" -j "$jobs" --target "${fuzzers[@]}"

# Seeds: files of the formats a fuzzer reads, when its corpus is new.
seed_pattern() {
  case "$1" in
    tfrecord_fuzzer) echo 'tests/data/smdebug/*/events/*/*.tfevents' ;;
    tensorboard_event_fuzzer) echo 'tests/data/frameworks/*/tb/events.out.tfevents.* tests/data/frameworks/*/tb/*/events.out.tfevents.*' ;;
    index_json_fuzzer) echo 'tests/data/smdebug/*/index/*/*.json tests/data/smdebug/*/collections/*/*.json' ;;
    system_metrics_fuzzer) echo 'tests/data/profiler/system/*/system/incremental/*/*.json' ;;
    framework_timeline_fuzzer) echo 'tests/data/profiler/framework/*/framework/pevents/*/*.json' ;;
    pytorch_trace_fuzzer) echo 'tests/data/frameworks/trace-fuzz-seeds/* tests/data/frameworks/*/*.pt.trace.json' ;;
    json_scanner_fuzzer) echo 'tests/data/smdebug/*/index/*/*.json tests/data/smdebug/*/collections/*/*.json tests/data/profiler/system/*/system/incremental/*/*.json' ;;
    s3_list_fuzzer) echo 'tests/data/s3/*.xml' ;;
    sagemaker_json_fuzzer) echo 'tests/data/sagemaker/fuzz-seeds/*' ;;
    sigv4_fuzzer) echo 'tests/data/auth/sigv4/*.txt' ;;
    credentials_file_fuzzer) echo 'tests/data/auth/credentials/*.txt' ;;
    dashboard_profiling_form_fuzzer) echo 'tests/data/dashboard/profiling-form-seeds/*' ;;
    dashboard_query_fuzzer) echo 'tests/data/dashboard/query-seeds/*' ;;
    *) echo '' ;;
  esac
}

# Inputs bigger than this are not tried (the structured request fuzzer
# builds large requests from a few bytes; the file formats need a little
# more room than libFuzzer's default of 4096).
max_len() {
  case "$1" in
    tfrecord_fuzzer | event_fuzzer | index_json_fuzzer | tensorboard_event_fuzzer) echo 65536 ;;
    framework_timeline_fuzzer | lying_store_fuzzer | pytorch_trace_fuzzer) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

mkdir -p "$build_dir/artifacts"
failed=()
printf '%-30s %12s %10s  %s\n' fuzzer runs corpus result
for fuzzer in "${fuzzers[@]}"; do
  corpus="$build_dir/corpus/$fuzzer"
  log="$build_dir/$fuzzer.log"
  if [[ ! -d "$corpus" ]]; then
    mkdir -p "$corpus"
    seeds=0
    for pattern in $(seed_pattern "$fuzzer"); do
      # shellcheck disable=SC2086 # the pattern is a glob to expand
      for seed in $pattern; do
        if [[ -f "$seed" ]]; then
          seeds=$((seeds + 1))
          cp "$seed" "$corpus/seed-$seeds"
        fi
      done
    done
  fi
  status=0
  "$build_dir/$fuzzer" -max_total_time="$seconds" -max_len="$(max_len "$fuzzer")" \
    -timeout=30 -rss_limit_mb=2560 -print_final_stats=1 \
    -artifact_prefix="$build_dir/artifacts/$fuzzer-" "$corpus" > "$log" 2>&1 || status=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  entries="$(find "$corpus" -type f | wc -l)"
  if ((status == 0)); then
    result=ok
  else
    result="FAILED (exit $status, log $log)"
    failed+=("$fuzzer")
  fi
  printf '%-30s %12s %10s  %s\n' "$fuzzer" "${runs:-?}" "$entries" "$result"
done

if ((${#failed[@]} > 0)); then
  for fuzzer in "${failed[@]}"; do
    echo "--- $fuzzer (last lines of $build_dir/$fuzzer.log)"
    tail -n 40 "$build_dir/$fuzzer.log"
  done
  exit 1
fi
