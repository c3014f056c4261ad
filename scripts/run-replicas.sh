#!/usr/bin/env bash
# Tries debugplane as a platform team runs it: three server replicas on one
# PostgreSQL, on this machine. Builds like run-server.sh, starts a PostgreSQL
# of its own (initdb in DIR/postgres, a loopback port) unless --database is
# given, and runs three replicas in the foreground until Ctrl-C:
#   replica 1: gRPC 127.0.0.1:7070, HTTP (SageMaker API, dashboard, /metrics) 127.0.0.1:7080
#   replica 2: gRPC 127.0.0.1:7071, HTTP 127.0.0.1:7081
#   replica 3: gRPC 127.0.0.1:7072, HTTP 127.0.0.1:7082
# Any replica serves any call (README: "Several replicas on one PostgreSQL").
# Production: deploy/replicas/ (one replica per machine).
#
# Usage: scripts/run-replicas.sh [--dir DIR] [--database postgresql://...]
#                                [--build-dir DIR] [-- SERVER_ARGS...]
#   --build-dir: use the binaries of a build directory you configured (e.g.
#   build/test) instead of installing the dependencies and building build/release.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${XDG_DATA_HOME:-$HOME/.local/share}/debugplane-replicas"
database=""
build=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --database) database="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run-replicas: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done

if [ -z "$build" ]; then
  build=build/release
  ./scripts/install-deps.sh
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDP_BUILD_TESTS=OFF \
    -DDP_BUILD_BENCH=OFF > /dev/null
fi
cmake --build "$build" --target debugplane-server debugplane debugplane-agent
mkdir -p "$dir"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
}
trap cleanup EXIT INT TERM

if [ -z "$database" ]; then
  bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
  pgdata="$dir/postgres"
  # PostgreSQL refuses to run as root: then it runs as nobody, with its data
  # where nobody can reach it (root's home is closed to other users).
  as_owner=()
  if [ "$(id -u)" -eq 0 ]; then
    as_owner=(runuser -u nobody --)
    pgdata="/var/tmp/debugplane-replicas-postgres"
  fi
  if [ ! -f "$pgdata/PG_VERSION" ]; then
    mkdir -p "$pgdata"
    [ "$(id -u)" -ne 0 ] || chown nobody "$pgdata"
    "${as_owner[@]}" "$bindir/initdb" -D "$pgdata" -U debugplane --auth=trust > "$dir/initdb.log"
  fi
  port=5433
  "${as_owner[@]}" "$bindir/postgres" -D "$pgdata" -h 127.0.0.1 -p "$port" -k "$pgdata" \
    > "$dir/postgres.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do
    "$bindir/pg_isready" -h 127.0.0.1 -p "$port" -q && break
    sleep 0.2
  done
  "$bindir/psql" -h 127.0.0.1 -p "$port" -U debugplane -d postgres -qtAc \
    "SELECT 1 FROM pg_database WHERE datname = 'debugplane'" | grep -q 1 ||
    "$bindir/createdb" -h 127.0.0.1 -p "$port" -U debugplane debugplane
  database="postgresql://debugplane@127.0.0.1:$port/debugplane"
  echo "PostgreSQL: $database (data in $pgdata, log $dir/postgres.log)"
fi

for replica in 1 2 3; do
  mkdir -p "$dir/replica-$replica"
  "$build/debugplane-server" --database "$database" --replica-id "replica-$replica" \
    --data-dir "$dir/replica-$replica" --listen "127.0.0.1:707$((replica - 1))" \
    --http-listen "127.0.0.1:708$((replica - 1))" "${extra[@]}" \
    > "$dir/replica-$replica.log" 2>&1 &
  pids+=($!)
  echo "replica-$replica: gRPC 127.0.0.1:707$((replica - 1)), dashboard" \
    "http://127.0.0.1:708$((replica - 1))/dashboard/, log $dir/replica-$replica.log"
done
echo "CLI: $build/debugplane --server 127.0.0.1:7071 list   (any replica)"
echo "Ctrl-C stops the replicas and PostgreSQL."
wait -n "${pids[@]}"
echo "run-replicas: a process ended; see the logs in $dir" >&2
