#!/usr/bin/env bash
# Builds abseil with ThreadSanitizer for the DP_SANITIZE=thread build, from
# Debian's own source package (the version and the patches of the libabsl
# that libgrpc is linked with), as shared libraries with Debian's sonames,
# into build/tools/absl-tsan. The TSan build links against them and finds
# them first at run time (an RPATH, CMakeLists.txt), libgrpc's lookups
# included, so every absl::Mutex, CondVar and Notification in the process is
# one TSan sees. Idempotent: does nothing once the prefix is complete.
#   scripts/build-absl-tsan.sh   # called by scripts/test.sh for TSan
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
prefix="$root/build/tools/absl-tsan"
work="$root/build/tools/absl-tsan-src"
stamp="$prefix/.built-from"

version="$(dpkg-query -W -f='${source:Version}' libabsl-dev)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
  echo "build-absl-tsan: abseil $version with TSan present ($prefix)"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# apt-get source needs a deb-src entry for Debian's archive.
if ! apt-get source --print-uris "abseil=$version" > /dev/null 2>&1; then
  codename="$(. /etc/os-release && echo "$VERSION_CODENAME")"
  echo "build-absl-tsan: adding Debian's source archive ($codename) to apt"
  $SUDO tee /etc/apt/sources.list.d/debian-src.sources > /dev/null <<SOURCES
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  $SUDO apt-get update -qq
fi

rm -rf "$work" "$prefix"
mkdir -p "$work"
echo "build-absl-tsan: fetching abseil $version's source package"
(cd "$work" && apt-get source -qq "abseil=$version" > /dev/null)
source_dir="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'abseil-*' | head -n 1)"

# Debian's configuration (debian/rules): shared libraries, C++17, its
# options.h (the inline namespace); tests off. Two jobs at most, niced: the
# build shares the machine.
echo "build-absl-tsan: building abseil with -fsanitize=thread into $prefix"
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DABSL_BUILD_TESTING=OFF \
  -DABSL_PROPAGATE_CXX_STD=ON -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" > /dev/null
nice -n 15 cmake --build "$work/build" -j "${DP_ABSL_JOBS:-2}"
cmake --install "$work/build" > /dev/null
echo "$version" > "$stamp"
rm -rf "$work"
echo "build-absl-tsan: done"
