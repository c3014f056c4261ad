#!/usr/bin/env bash
# Installs every build, test and run dependency of debugplane from Debian's
# package archive. Idempotent; needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git universal-ctags
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libre2-dev libsqlite3-dev libpq-dev libspdlog-dev libfmt-dev libssl-dev
  nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libtinyxml2-dev libmicrohttpd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-dev openssl
  chromium fonts-dejavu-core nodejs
  python3 python3-venv python3-grpcio python3-protobuf python3-botocore
  zlib1g-dev python3-torch
  postgresql
  prometheus-cpp-dev prometheus
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The SageMaker HTTP API is tested with the real clients (boto3 and the AWS
# CLI, tests/service/http/sagemaker_clients_test.py): Debian's packages, only
# when the python3 and aws on PATH do not already provide them.
clients=()
python3 -c 'import boto3' 2> /dev/null || clients+=(python3-boto3)
aws --version > /dev/null 2>&1 || clients+=(awscli)
if [ ${#clients[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing ${clients[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${clients[@]}"
fi

# The S3 tests run against moto's S3 server (tests/objectstore/s3_test_server.py).
# Debian does not package moto, so unless the python3 on PATH already has it,
# it goes into a virtual environment under build/tools that the tests look
# for (tests/objectstore/s3_test_server.cc), installed from PyPI with pip.
moto_venv="$(cd "$(dirname "$0")/.." && pwd)/build/tools/moto-venv"
moto_requirement='moto[server]==5.2.1'
if python3 -c 'import moto.server, boto3' 2> /dev/null; then
  echo "install-deps: moto's server present ($(command -v python3))"
elif [ -x "$moto_venv/bin/python3" ] && "$moto_venv/bin/python3" -c 'import moto.server, boto3' 2> /dev/null; then
  echo "install-deps: moto's server present ($moto_venv)"
else
  echo "install-deps: installing $moto_requirement into $moto_venv"
  python3 -m venv "$moto_venv"
  "$moto_venv/bin/python3" -m pip install --quiet "$moto_requirement"
fi

# The dashboard (web/) embeds uPlot, and its browser tests drive Debian's
# Chromium with playwright-core: npm packages pinned by web/package-lock.json.
# Debian's nodejs comes without npm (its own package); NodeSource's has it.
if ! command -v npm > /dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing npm"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
fi
web_dir="$(cd "$(dirname "$0")/.." && pwd)/web"
installed_lock="$web_dir/node_modules/.package-lock.json"
if [ -f "$installed_lock" ] && [ "$installed_lock" -nt "$web_dir/package-lock.json" ]; then
  echo "install-deps: web/node_modules present"
else
  echo "install-deps: npm ci in web/"
  (cd "$web_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
