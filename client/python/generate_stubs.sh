#!/usr/bin/env bash
# Generates the Python gRPC stubs of debugplane.v1 from proto/ into OUT_DIR
# (default client/python/gen), with Debian's protoc and grpc_python_plugin
# (packages protobuf-compiler and protobuf-compiler-grpc), matching Debian's
# python3-grpcio and python3-protobuf.
#   client/python/generate_stubs.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto_dir="$here/../../proto"
out_dir="${1:-$here/gen}"
mkdir -p "$out_dir"
plugin="$(command -v grpc_python_plugin || true)"
if [ -z "$plugin" ]; then
  echo "generate_stubs: grpc_python_plugin not found; install Debian's protobuf-compiler-grpc" >&2
  exit 2
fi
protoc -I "$proto_dir" --python_out="$out_dir" --grpc_python_out="$out_dir" \
  --plugin=protoc-gen-grpc_python="$plugin" \
  debugplane/v1/training_job.proto debugplane/v1/profiler_report.proto
# Package markers, so that `import debugplane.v1.training_job_pb2` works.
touch "$out_dir/debugplane/__init__.py" "$out_dir/debugplane/v1/__init__.py"
echo "generate_stubs: stubs in $out_dir"
