#!/usr/bin/env bash
# Installs the dependencies, builds debugplane and runs the server in the
# foreground with an embedded SQLite database under the default data directory
# ($XDG_DATA_HOME/debugplane or ~/.local/share/debugplane).
# Extra arguments go to debugplane-server, e.g. --listen 0.0.0.0:7070.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DDP_BUILD_TESTS=OFF \
  -DDP_BUILD_BENCH=OFF > /dev/null
cmake --build build/release --target debugplane-server debugplane debugplane-agent
echo "CLI: $(pwd)/build/release/debugplane (e.g. build/release/debugplane list)"
echo "Agent: $(pwd)/build/release/debugplane-agent run --job NAME -- COMMAND"
# The SageMaker API over HTTP (boto3, the AWS CLI) and the dashboard on 127.0.0.1:7080 unless
# the arguments say otherwise.
http=(--http-listen 127.0.0.1:7080)
for arg in "$@"; do
  case "$arg" in --http-listen*) http=() ;; esac
done
[ ${#http[@]} -eq 0 ] ||
  echo "SageMaker API: aws sagemaker list-training-jobs --endpoint-url http://127.0.0.1:7080" &&
  echo "Dashboard: http://127.0.0.1:7080/dashboard/"
exec build/release/debugplane-server "${http[@]}" "$@"
