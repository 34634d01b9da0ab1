#!/bin/bash
# The install tests (scripts/test.sh step `install`):
#   staging.sh  cmake --install into a staging prefix + the installed server under gdb
#   debs.sh     lintian, the .debs in a clean Debian 12 chroot, DKMS for the 6.1 and 6.12 headers,
#               dpkg -r
#   the QEMU harness boots the 6.1 module DKMS built (tests/qemu/run.sh 6.1 with GDBTRACE_KO_DIR)
# All run; the exit status is non-zero if any failed. Environment: BUILD_DIR (default ./build).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$repo/build}
rc=0
echo "=== tests/install/staging.sh"
"$here/staging.sh" || rc=1
echo
echo "=== tests/install/debs.sh"
"$here/debs.sh" || rc=1
echo
echo "=== tests/qemu/run.sh 6.1 with the DKMS-built module"
if ! grep -q GDBTRACE_KO_DIR "$repo/tests/qemu/run.sh"; then
  echo "FAIL: tests/qemu/run.sh cannot boot a prebuilt module (no GDBTRACE_KO_DIR)"
  rc=1
elif [ ! -f "$build/install-test/ko/6.1/gdbtrace.ko" ]; then
  echo "FAIL: debs.sh left no DKMS-built module in $build/install-test/ko/6.1"
  rc=1
else
  GDBTRACE_KO_DIR=$build/install-test/ko GDBTRACE_BUILD=$build "$repo/tests/qemu/run.sh" 6.1 || rc=1
fi
exit $rc
