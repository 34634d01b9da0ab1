#!/bin/bash
# Builds the Debian packages from the build tree (CPack, cmake/package.cmake):
#   BUILD_DIR/packages/gdbtrace_<version>-1_amd64.deb     server, gdb plugin, man pages, docs
#   BUILD_DIR/packages/gdbtrace-dkms_<version>-1_all.deb  kernel module source for DKMS
# Configures and builds first if needed (scripts/build.sh). Environment: BUILD_DIR (default ./build),
# JOBS (default 2). Prints the paths of the packages.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
[ -f "$build/build.ninja" ] || BUILD_DIR=$build "$repo/scripts/build.sh" >&2
# Only what the install rules take: the server and the man pages.
ninja -C "$build" -j"${JOBS:-2}" gdbtrace-server gdbtrace_man >&2
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB --config CPackConfig.cmake) >"$build/cpack.log" 2>&1 || {
  cat "$build/cpack.log" >&2
  exit 1
}
ls "$build"/packages/*.deb
